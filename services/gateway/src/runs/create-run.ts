import type { PrismaClient, Prisma } from "@agentrun/db";
import { newId } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import { reserveRunCredits } from "@agentrun/credits";
import type { RunContext, RunEvent } from "@agentrun/contracts";
import type { AuthContext } from "../request-context";

/** Credits taken when a run is accepted; the rest of its cost is settled when it ends. */
export const RUN_RESERVATION = 1;
export const TITLE_MAX_CHARS = 80;

export interface CreateRunInput {
  auth: AuthContext;
  query: string;
  taskId?: string;
  context?: RunContext;
  /** Widget visitor starting the run, when it came through the widget gateway. */
  visitorId?: string;
}

export interface CreatedRun {
  runId: string;
  taskId: string;
  started: RunEvent;
}

/**
 * Records a new run as `queued` in one transaction: creates the task or claims the existing
 * one (a conditional update, so two concurrent requests cannot both start a run on it),
 * reserves the base credit, inserts the run and its `run_started` event (seq 1).
 * Checks follow the contract's order: task 404/403, then 409, then 402.
 */
export async function createRun(prisma: PrismaClient, input: CreateRunInput): Promise<CreatedRun> {
  const { auth } = input;
  const runId = newId("run");
  return prisma.$transaction(async (tx) => {
    let taskId: string;
    if (input.taskId) {
      taskId = input.taskId;
      await claimTask(tx, input, runId);
    } else {
      taskId = newId("task");
      await tx.task.create({
        data: {
          id: taskId,
          orgId: auth.orgId,
          agentId: auth.agentId,
          title: input.query.slice(0, TITLE_MAX_CHARS),
          userId: input.context?.user_id,
          metadata: (input.context?.metadata as Prisma.InputJsonValue) ?? undefined,
          visitorId: input.visitorId,
          activeRunId: runId,
          runCount: 1,
        },
      });
    }
    await reserveRunCredits(tx, auth.orgId, runId, RUN_RESERVATION);
    const started: RunEvent = { seq: 1, type: "run_started", run_id: runId, task_id: taskId };
    await tx.run.create({
      data: {
        id: runId,
        taskId,
        orgId: auth.orgId,
        agentId: auth.agentId,
        query: input.query,
        context: (input.context as Prisma.InputJsonValue) ?? undefined,
        creditsReserved: RUN_RESERVATION,
        lastSeq: 1,
        events: { create: { seq: 1, type: started.type, data: started } },
      },
    });
    return { runId, taskId, started };
  });
}

async function claimTask(tx: Prisma.TransactionClient, input: CreateRunInput, runId: string): Promise<void> {
  const { auth } = input;
  const taskId = input.taskId!;
  const claimed = await tx.task.updateMany({
    where: { id: taskId, orgId: auth.orgId, agentId: auth.agentId, activeRunId: null, ...(input.visitorId ? { visitorId: input.visitorId } : {}) },
    data: { activeRunId: runId, runCount: { increment: 1 }, status: "pending" },
  });
  if (claimed.count === 1) return;
  const task = await tx.task.findUnique({ where: { id: taskId }, select: { orgId: true, agentId: true, visitorId: true, activeRunId: true } });
  if (!task) throw new AppError("task_not_found", { message: `No task has the id '${taskId}'.` });
  if (task.orgId !== auth.orgId || task.agentId !== auth.agentId || (input.visitorId && task.visitorId !== input.visitorId)) {
    throw new AppError("forbidden", { message: "This task belongs to another organization, agent or visitor." });
  }
  throw new AppError("run_in_progress", { message: `Task '${taskId}' already has a queued or running run (${task.activeRunId}).` });
}
