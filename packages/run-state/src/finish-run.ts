import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { newId, storableJsonText, type PrismaClient } from "@agentrun/db";
import { runCost } from "@agentrun/credits";
import type { CutFinishReason, RunEvent, RunEventInput } from "@agentrun/contracts";
import { mayHaveBeenCarriedOut } from "@agentrun/errors";
import { readUnstoredEvents, runCancelKey, RunEventWriter } from "@agentrun/events";
import { resultsOfOpenToolCalls } from "./open-tool-calls";
import { recordOfEvents, type MessageRecord } from "./run-record";
import { endStoredBefore, publishStoredTerminal } from "./stored-end";
import { forgetLogTakeOver, LOST_LOG_SEQ_GAP, takeOverLog } from "./take-over-log";
import { withRetry } from "./with-retry";

export type FinalStatus = "completed" | "failed" | "cancelled";

/** What a run consumed. */
export interface FinishRunUsage {
  promptTokens: number;
  completionTokens: number;
  /** Tool calls the model made, stored as the run's `tool_call_count`. */
  toolCalls: number;
  /**
   * The tool calls that are charged: those whose tool ran. Calls refused before running, or
   * failed by the service's own outage, are counted in `toolCalls` only.
   */
  chargedToolCalls: number;
  /** Model calls started. */
  modelCalls: number;
}

export interface FinishRunInput {
  runId: string;
  status: FinalStatus;
  output?: string;
  error?: { code: string; message: string };
  /** What the run consumed. A run cancelled before its first model call (`modelCalls` 0) costs nothing. */
  usage?: FinishRunUsage;
  /** The agent's pricing override, if any. */
  pricing?: unknown;
  /** A completed run whose answer the model ended early: why (sent in `run_completed`, stored on the run). */
  finishReason?: CutFinishReason;
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
  /**
   * End the run only while it is queued: a caller that is not a worker must not end a run that a
   * worker claimed meanwhile (it would go on executing a run already ended).
   */
  onlyIfQueued?: boolean;
  /**
   * For a caller that is not the run's worker: the run's record is rebuilt from its events (read
   * once the run is taken over, so nothing can be added meanwhile), after `messages` (the user's
   * query): what the model said before its tool calls, each call with its result, and the count
   * of calls (`tool_call_count`), as its worker would have recorded them though it is gone. A
   * cancelled run's output is also the text its events streamed in its last model call, stored
   * as the assistant's message: what it had said when it stopped. A failed run has no output.
   */
  fromEvents?: boolean;
}

export interface FinishRunDeps {
  prisma: PrismaClient;
  redis: Redis;
  redisPrefix: string;
}

/**
 * Ends a run exactly once: in one statement (the `agentrun_finish_run` function) it moves a
 * queued or running run to its final status, stores its messages, pending events and terminal
 * event, frees and updates the task, and settles credits (failed runs are refunded). Only then is the terminal event published,
 * so a reader that sees it also sees the final state. Returns the terminal event, or null if
 * the run had already ended (someone else finished it) or was taken over from this writer.
 *
 * A caller that is not the run's worker (cancel, sweepers, a worker taking over a dead one's
 * run) first takes the run over: the run's log refuses the worker's events from then on, and
 * PostgreSQL its batches (worker_id). So a worker that is in fact still alive cannot add events
 * after the terminal event, and the events read here are all there will be.
 */
export async function finishRun(deps: FinishRunDeps, input: FinishRunInput): Promise<RunEvent | null> {
  if (input.writer) {
    if (input.writer.superseded) return null;
    return storeEnd(deps, input, input.writer, await input.writer.drain(), input.writer.writerId);
  }
  if (input.onlyIfQueued) {
    // A queued run has no worker yet, and the end applies only if none claims it first. Until
    // one does, the run's only event is its run_started (seq 1), stored with the run: the end is
    // numbered after it without reading the run's log, so that a queued run can be ended (and
    // its end is not held up) while Redis is down.
    const writer = new RunEventWriter({ ...deps, runId: input.runId, lastSeq: 1, onError: () => {} });
    return storeEnd(deps, input, writer, [], undefined);
  }
  return finishInStead(deps, input);
}

/** How often a take-over is tried again when a worker claimed the run meanwhile. */
const TAKE_OVER_ATTEMPTS = 3;

/** {@link finishRun} for a caller that is not the run's worker: takes the run over, then ends it. */
async function finishInStead(deps: FinishRunDeps, input: FinishRunInput): Promise<RunEvent | null> {
  const token = `end_${randomUUID().replaceAll("-", "")}`;
  for (let attempt = 1; ; attempt++) {
    // PostgreSQL first: a flush of the worker in progress holds a share lock on the run, so this
    // waits for it, and later flushes find the run under another id. Then the run's log.
    const [taken] = await deps.prisma.$queryRaw<{ status: string; previous: string | null }[]>`
      UPDATE runs r SET worker_id = ${token}
      FROM (SELECT id, worker_id FROM runs WHERE id = ${input.runId} AND status IN ('queued', 'running') FOR UPDATE) o
      WHERE r.id = o.id RETURNING r.status::text AS status, o.worker_id AS previous`;
    // Ended already, perhaps by its worker while another taker held its log: make sure the
    // terminal event reaches the run's channel (readers drop a repeated seq).
    if (!taken) {
      await publishStoredTerminal(deps, input.runId);
      return null;
    }
    // A queued run has no worker to shut out: one that claims it meanwhile makes the end below
    // find the run under its id, and the next attempt takes it over as a running run.
    const logLost = taken.status === "running" && (await takeOverLog(deps, input.runId, token, taken.previous));
    let terminal: RunEvent | null;
    try {
      const unstored = await readUnstoredEvents(deps, input.runId);
      // Events its worker published may be in neither store: the terminal event is numbered past
      // them, so that a client holding them does not take it for one it has (see LOST_LOG_SEQ_GAP).
      const lastSeq = unstored.lastSeq + (logLost ? LOST_LOG_SEQ_GAP : 0);
      const writer = new RunEventWriter({ ...deps, runId: input.runId, lastSeq, writerId: token, onError: () => {} });
      // A tool its gone worker was running gets its result (stopped) before the end.
      for (const result of resultsOfOpenToolCalls(unstored.all)) writer.emit(result);
      const results = await writer.drain();
      const pending = [...unstored.events, ...results];
      terminal = await storeEnd(deps, input.fromEvents ? withEventRecord(input, [...unstored.all, ...results]) : input, writer, pending, token);
    } catch (err) {
      if (logLost) await forgetLogTakeOver(deps, input.runId, token);
      throw err;
    }
    if (terminal) return terminal;
    if (await publishStoredTerminal(deps, input.runId)) return null;
    // Still in progress: a worker claimed the queued run after it was taken over. Again.
    if (attempt >= TAKE_OVER_ATTEMPTS) throw new Error(`run ${input.runId} kept being claimed while it was being ended`);
  }
}

/**
 * `input` with the record its `events` (all of them, in order) give: its messages, tool calls and,
 * unless it failed, its output (see `fromEvents`). It consumed what is unknown here: no model call
 * is counted, so it costs nothing.
 */
function withEventRecord(input: FinishRunInput, events: RunEvent[]): FinishRunInput {
  const record = recordOfEvents(events);
  const output = input.status === "failed" ? "" : record.lastText;
  const messages = [...input.messages, ...record.messages, ...(output ? [{ role: "assistant" as const, content: output }] : [])];
  const usage = input.usage ?? { promptTokens: 0, completionTokens: 0, toolCalls: record.toolCalls, chargedToolCalls: 0, modelCalls: 0 };
  return { ...input, output, messages, usage };
}

/**
 * A count as PostgreSQL's `integer` takes it: a whole number from 0 to 2^31 − 1 (the callers'
 * counts already are; this is the last line of defence, like storableJsonText, so that no figure
 * leaves a run that cannot end).
 */
function storableCount(n: number): number {
  return Number.isFinite(n) ? Math.min(Math.max(0, Math.ceil(n)), 2_147_483_647) : 0;
}

/** Failures that still pay for what the run consumed: limits its own work ran into. */
const CHARGED_FAILURES: ReadonlySet<string> = new Set(["max_steps_exceeded", "run_timeout"]);

/**
 * Stores the end of a run with `pending` (the events not yet in PostgreSQL), through `writer`,
 * and publishes the terminal event. With `writerId`, only while the run is held under that id.
 */
async function storeEnd(deps: FinishRunDeps, input: FinishRunInput, writer: RunEventWriter, pending: RunEvent[], writerId: string | undefined): Promise<RunEvent | null> {
  const { prisma } = deps;
  const terminal = writer.takeTerminal(terminalFor(input));

  const usage = input.usage ?? { promptTokens: 0, completionTokens: 0, toolCalls: 0, chargedToolCalls: 0, modelCalls: 0 };
  // Failed runs are refunded, except one stopped by its agent's own step limit or by the run time
  // limit: like a cancelled one, it pays for what it consumed. Either, stopped before it reached
  // the model, pays nothing.
  const paysForUse = input.status === "cancelled" || (input.status === "failed" && CHARGED_FAILURES.has(input.error?.code ?? ""));
  const free = (input.status === "failed" && !paysForUse) || (paysForUse && usage.modelCalls === 0);
  const cost = free ? 0 : runCost({ toolCalls: usage.chargedToolCalls, totalTokens: usage.promptTokens + usage.completionTokens }, input.pricing);
  const messages = input.messages.map((m) => ({
    id: newId("msg"),
    role: m.role,
    content: m.content,
    tool: m.tool,
    action: m.action,
    tool_call_id: m.toolCallId,
    params: m.params,
    result: m.result,
  }));
  // One round trip (see the agentrun_finish_run migration): the run's row lock is held only
  // for the statement, so concurrent ends never queue on pool connections. Events and messages
  // go through storableJsonText as a last line of defence: text PostgreSQL refuses (U+0000, a lone
  // surrogate) must never leave a run that cannot end. With a writer id, the function ends the
  // run only if it is still held under that id (a run taken over meanwhile is the taker's to end).
  const store = () => prisma.$queryRaw<{ terminal: RunEvent | null }[]>`
    SELECT agentrun_finish_run(
      ${input.runId}, ${input.status}::"RunStatus", ${input.output ?? ""}, ${cost}::integer,
      ${storableCount(usage.promptTokens)}::integer, ${storableCount(usage.completionTokens)}::integer, ${storableCount(usage.toolCalls)}::integer,
      ${input.error?.code ?? null}, ${input.error?.message ?? null},
      ${JSON.stringify(terminal)}::jsonb, ${storableJsonText(pending)}::jsonb, ${storableJsonText(messages)}::jsonb, ${newId("led")},
      ${input.onlyIfQueued ?? false}, ${writerId ?? null}::text
    ) AS terminal`;
  let rows: { terminal: RunEvent | null }[];
  let answerLost = false;
  try {
    rows = await withRetry(input.retryForMs ?? 0, () => store().catch((err: unknown) => ((answerLost ||= mayHaveBeenCarriedOut(err)), Promise.reject(err))));
  } catch (err) {
    // Nothing was stored: a later attempt must store these events and reuse the terminal's seq.
    writer.giveBack(pending, terminal);
    throw err;
  }
  // An attempt whose answer was lost (its connection cut, its read timed out) may have committed:
  // the retry then finds the run ended, by this very end. (Where even that cannot be read, the
  // end is stored all the same: readers find it when they poll.)
  const stored = rows[0]?.terminal ?? (answerLost ? await endStoredBefore(deps, input.runId, terminal, writerId).catch(() => null) : null);
  if (!stored) return null;
  // Rare (an answer the model cut short), so a statement of its own rather than an argument of
  // the function: on the completed run (which nothing restarts), before its end is published, so
  // that a reader woken by run_completed finds it on the run too. (Its event carries it anyway.)
  if (stored.type === "run_completed" && stored.finish_reason) {
    await withRetry(input.retryForMs ?? 0, () => prisma.$executeRaw`UPDATE runs SET finish_reason = ${stored.finish_reason} WHERE id = ${input.runId} AND status = 'completed'`).catch(() => 0);
  }
  // Stored already: readers that miss the publish (Redis down) find the event when they poll.
  // The run's own worker waits for the publish; anyone else must not wait out a Redis outage.
  const published = writer.publishStored(stored);
  if (input.writer) await published;
  return stored;
}

/**
 * Ends a run that nobody executes (its job could not be queued, was lost, or its worker died) as
 * failed with `error`, keeping the user's query in the task's history. False if it had ended
 * already, or with `onlyIfQueued` if it is no longer queued.
 */
export async function failRun(deps: FinishRunDeps, run: { id: string; query: string }, error: { code: string; message: string }, opts: { onlyIfQueued?: boolean } = {}): Promise<boolean> {
  const terminal = await finishRun(deps, { runId: run.id, status: "failed", error, messages: [{ role: "user", content: run.query }], onlyIfQueued: opts.onlyIfQueued });
  return terminal !== null;
}

/**
 * Ends a running run whose worker is gone (a sweeper or a worker taking over its job does this):
 * `cancelled` when it was asked to stop (the cancel reached no live worker), with what it had
 * said (the text its events streamed in its last model call) as its output, failed with `error`
 * otherwise; either way with the messages and tool calls its events show (see `fromEvents`).
 * What it consumed is unknown here, so it costs nothing. False if it had ended already.
 */
export async function endAbandonedRun(deps: FinishRunDeps, run: { id: string; query: string }, error: { code: string; message: string }): Promise<boolean> {
  const cancelled = await cancelAskedFor(deps, run.id);
  const end = cancelled ? { status: "cancelled" as const } : { status: "failed" as const, error };
  return (await finishRun(deps, { runId: run.id, ...end, messages: [{ role: "user", content: run.query }], fromEvents: true })) !== null;
}

/**
 * Whether a cancel of the run was asked for: recorded on its row (committed before the cancel
 * sets the run's Redis flag, and kept when Redis lost the flag or cannot be read now), or flagged
 * in Redis.
 */
async function cancelAskedFor(deps: FinishRunDeps, runId: string): Promise<boolean> {
  const row = await deps.prisma.run.findUnique({ where: { id: runId }, select: { cancelRequestedAt: true } });
  if (row?.cancelRequestedAt) return true;
  return (await deps.redis.exists(runCancelKey(deps.redisPrefix, runId)).catch(() => 0)) > 0;
}

function terminalFor(input: FinishRunInput): RunEventInput {
  if (input.status === "completed") return { type: "run_completed", run_id: input.runId, credits_used: 0, ...(input.finishReason && { finish_reason: input.finishReason }) };
  if (input.status === "cancelled") return { type: "run_cancelled", run_id: input.runId };
  return { type: "run_failed", run_id: input.runId, error: input.error ?? { code: "internal_error", message: "The run failed." } };
}
