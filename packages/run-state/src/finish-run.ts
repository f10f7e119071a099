import type { Redis } from "ioredis";
import { newId, type Prisma, type PrismaClient, type MessageRole, type TaskStatus } from "@agentrun/db";
import { runCost, settleRunCredits } from "@agentrun/credits";
import type { RunEvent, RunEventInput } from "@agentrun/contracts";
import { isUnavailableError } from "@agentrun/errors";
import { RUN_LOG_TTL_AFTER_END_S, readStoredEvents, runChannel, runLogKey, type RunEventWriter } from "@agentrun/events";

export type FinalStatus = "completed" | "failed" | "cancelled";

/** Task status that follows a run's final status. */
export const TASK_STATUS_AFTER: Record<FinalStatus, TaskStatus> = { completed: "completed", failed: "failed", cancelled: "completed" };

export interface MessageRecord {
  role: MessageRole;
  content: string;
  tool?: string;
  action?: string;
  toolCallId?: string;
  params?: Record<string, unknown>;
  result?: unknown;
}

export interface FinishRunInput {
  runId: string;
  status: FinalStatus;
  output?: string;
  error?: { code: string; message: string };
  usage?: { promptTokens: number; completionTokens: number; toolCalls: number };
  /** The agent's pricing override, if any. */
  pricing?: unknown;
  /** Messages of this run, in order (the user's query first). */
  messages: MessageRecord[];
  /** The run's event writer, when the caller is the worker executing it. */
  writer?: RunEventWriter;
  /**
   * Keep retrying while PostgreSQL is unreachable for up to this long, so that a run finished
   * during a database outage is recorded when the database returns instead of being lost.
   * @defaultValue 0
   */
  retryForMs?: number;
}

export interface FinishRunDeps {
  prisma: PrismaClient;
  redis: Redis;
  redisPrefix: string;
}

/**
 * Ends a run exactly once: in one transaction it moves a queued or running run to its final
 * status, stores its messages, pending events and terminal event, frees and updates the task,
 * and settles credits (failed runs are refunded). Only then is the terminal event published,
 * so a reader that sees it also sees the final state. Returns the terminal event, or null if
 * the run had already ended (someone else finished it).
 */
export async function finishRun(deps: FinishRunDeps, input: FinishRunInput): Promise<RunEvent | null> {
  const { prisma } = deps;
  const pending = input.writer?.drain() ?? [];
  const nextSeq = input.writer ? null : await nextSeqFromStore(deps, input.runId);
  const terminalInput = terminalFor(input);
  const terminal: RunEvent = input.writer ? input.writer.takeTerminal(terminalInput) : ({ seq: nextSeq!, ...terminalInput } as RunEvent);

  const done = await withRetry(input.retryForMs ?? 0, () => prisma.$transaction(async (tx) => {
    const run = await tx.run.findUnique({ where: { id: input.runId }, select: { status: true, orgId: true, taskId: true, creditsReserved: true, createdAt: true, startedAt: true } });
    if (!run || (run.status !== "queued" && run.status !== "running")) return false;
    const now = new Date();
    const usage = input.usage ?? { promptTokens: 0, completionTokens: 0, toolCalls: 0 };
    const cost = input.status === "failed" ? 0 : runCost({ toolCalls: usage.toolCalls, totalTokens: usage.promptTokens + usage.completionTokens }, input.pricing);
    const durationMs = now.getTime() - (run.startedAt ?? run.createdAt).getTime();
    if (terminal.type === "run_completed") {
      terminal.credits_used = cost;
      terminal.duration_ms = durationMs;
    }
    const claimed = await tx.run.updateMany({
      where: { id: input.runId, status: { in: ["queued", "running"] } },
      data: {
        status: input.status,
        output: input.output ?? "",
        creditsUsed: cost,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        toolCallCount: usage.toolCalls,
        durationMs,
        errorCode: input.error?.code ?? null,
        errorMessage: input.error?.message ?? null,
        completedAt: now,
        lastSeq: terminal.seq,
      },
    });
    if (claimed.count !== 1) return false;
    await tx.task.update({
      where: { id: run.taskId },
      data: { status: TASK_STATUS_AFTER[input.status], creditsUsed: { increment: cost } },
    });
    // Free the task only if this run still holds it.
    await tx.task.updateMany({ where: { id: run.taskId, activeRunId: input.runId }, data: { activeRunId: null } });
    await settleRunCredits(tx, { orgId: run.orgId, runId: input.runId, cost, reserved: run.creditsReserved });
    const events = [...pending, terminal];
    await tx.runEvent.createMany({
      data: events.map((e) => ({ runId: input.runId, seq: e.seq, type: e.type, data: e as Prisma.InputJsonValue })),
      skipDuplicates: true,
    });
    if (input.messages.length) {
      const base = now.getTime() - input.messages.length;
      await tx.message.createMany({
        data: input.messages.map((m, i) => ({
          id: newId("msg"),
          taskId: run.taskId,
          runId: input.runId,
          role: m.role,
          content: m.content,
          tool: m.tool,
          action: m.action,
          toolCallId: m.toolCallId,
          params: (m.params as Prisma.InputJsonValue) ?? undefined,
          result: m.result === undefined ? undefined : (m.result as Prisma.InputJsonValue),
          // Distinct, ordered timestamps keep history order stable.
          createdAt: new Date(base + i),
        })),
      });
    }
    return true;
  }));
  if (!done) return null;
  // Stored already: readers that miss the publish (Redis down) find the event when they poll.
  await publishTerminal(deps, input.runId, terminal, input.writer);
  return terminal;
}

/** Runs `fn`, retrying with back-off while the error means a dependency is down, for up to `forMs`. */
async function withRetry<T>(forMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let delay = 200; ; delay = Math.min(delay * 2, 5000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isUnavailableError(err) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

function terminalFor(input: FinishRunInput): RunEventInput {
  if (input.status === "completed") return { type: "run_completed", run_id: input.runId, credits_used: 0 };
  if (input.status === "cancelled") return { type: "run_cancelled", run_id: input.runId };
  return { type: "run_failed", run_id: input.runId, error: input.error ?? { code: "internal_error", message: "The run failed." } };
}

async function nextSeqFromStore(deps: FinishRunDeps, runId: string): Promise<number> {
  const events = await readStoredEvents(deps, runId, 0);
  return (events.at(-1)?.seq ?? 0) + 1;
}

async function publishTerminal(deps: FinishRunDeps, runId: string, terminal: RunEvent, writer?: RunEventWriter): Promise<void> {
  if (writer) return writer.publishStored(terminal);
  const key = runLogKey(deps.redisPrefix, runId);
  const json = JSON.stringify(terminal);
  // Not awaited: the terminal event is stored, and a caller must not wait out a Redis outage.
  void deps.redis
    .multi()
    .rpush(key, json)
    .expire(key, RUN_LOG_TTL_AFTER_END_S)
    .publish(runChannel(deps.redisPrefix, runId), json)
    .exec()
    .catch(() => {
      // Readers poll the store, where the terminal event already is.
    });
}
