import type { PrismaClient } from "@agentrun/db";
import { newId } from "@agentrun/db";
import { AppError, sqlStateOf } from "@agentrun/errors";
import type { RunContext, RunEvent } from "@agentrun/contracts";
import type { AuthContext } from "../request-context";

export const TITLE_MAX_CHARS = 80;

export interface CreateRunInput {
  auth: AuthContext;
  query: string;
  taskId?: string;
  context?: RunContext;
  /** Widget visitor starting the run, when it came through the widget gateway. */
  visitorId?: string;
  /** Ids chosen in advance (an Idempotency-Key claim names them before the run exists). */
  ids?: { runId: string; taskId: string };
}

/** Ids for a run about to be created: a new run id, and a new task id unless it continues one. */
export function newRunIds(taskId?: string): { runId: string; taskId: string } {
  return { runId: newId("run"), taskId: taskId ?? newId("task") };
}

export interface CreatedRun {
  runId: string;
  taskId: string;
  started: RunEvent;
}

/** SQLSTATEs raised by agentrun_create_run (see its migration) and what they mean to the caller. */
const REFUSALS: Record<string, (reservation: number) => AppError> = {
  AR404: () => new AppError("task_not_found"),
  AR403: () => new AppError("forbidden", { message: "This task belongs to another organization, agent or visitor." }),
  AR409: () => new AppError("run_in_progress", { message: "The task already has a queued or running run; wait for it to end or cancel it." }),
  // A run needs a positive balance that covers the agent's base price (1 credit unless priced).
  AR402: (reservation) =>
    reservation > 1
      ? new AppError("insufficient_credits", { message: `The organization's credit balance is below this agent's base price of ${reservation} credits.` })
      : new AppError("insufficient_credits"),
};

/**
 * Records a new run as `queued` in one database round trip (the `agentrun_create_run`
 * function): creates the task or claims the existing one with a conditional update (so two
 * concurrent requests cannot both start a run on it), reserves the agent's base price with a ledger
 * entry, and inserts the run, its `run_started` event (seq 1) and the user's message. Refusals follow the contract's
 * order: task 404/403, then 409, then 402.
 */
export async function createRun(prisma: PrismaClient, input: CreateRunInput): Promise<CreatedRun> {
  const { auth } = input;
  const { runId, taskId } = input.ids ?? newRunIds(input.taskId);
  const started: RunEvent = { seq: 1, type: "run_started", run_id: runId, task_id: taskId };
  const metadata = input.context?.metadata === undefined ? null : JSON.stringify(input.context.metadata);
  const context = input.context === undefined ? null : JSON.stringify(input.context);
  try {
    await prisma.$queryRaw`SELECT agentrun_create_run(
      ${runId}, ${taskId}, ${input.taskId === undefined}, ${auth.orgId}, ${auth.agentId},
      ${input.query}, ${[...input.query].slice(0, TITLE_MAX_CHARS).join("")}, ${input.context?.user_id ?? null},
      ${metadata}::jsonb, ${context}::jsonb, ${input.visitorId ?? null},
      ${auth.runReservation}::int, ${newId("led")}, ${JSON.stringify(started)}::jsonb, ${newId("msg")})`;
  } catch (err) {
    const refusal = REFUSALS[sqlStateOf(err) ?? ""];
    if (refusal) throw refusal(auth.runReservation);
    throw err;
  }
  return { runId, taskId, started };
}
