import { readStoredEvents, releaseRunHeartbeatIfHeld, renewRunHeartbeatIfHeld, RUN_LOG_TTL_LIVE_S, runHeartbeatKey, runWriterKey, takeOverRunWriter } from "@agentrun/events";
import type { Logger } from "@agentrun/logger";
import { endAbandonedRun } from "@agentrun/run-state";
import { pause, waitOneRenewal } from "./heartbeat-renewal";
import type { HistoryMessage } from "./prompt";
import type { RunDeps } from "./run-deps";
import { WORKER_LOST } from "./run-failure";

export interface ClaimedRun {
  /** Seq of the last event already stored (1: only run_started). */
  lastSeq: number;
  /**
   * How long ago the run was first claimed (0 for a fresh claim): a run restarted by another
   * worker keeps the time limit counted from its first claim.
   */
  elapsedMs: number;
  run: { id: string; taskId: string; orgId: string; agentId: string; query: string; context: unknown; taskUserId: string | null };
  /** The task's earlier user and assistant messages, oldest first (at most HISTORY_MAX_MESSAGES, and none that recentHistory would leave out for HISTORY_MAX_CHARS by their size alone). */
  history: HistoryMessage[];
}

interface ClaimRow {
  id: string;
  task_id: string;
  org_id: string;
  agent_id: string;
  query: string;
  context: unknown;
  task_user_id: string | null;
  history: HistoryMessage[];
  elapsed_ms?: number | null;
  /** Set by a take-over only: a cancel is recorded on the run's row. */
  cancel_requested?: boolean;
}

/**
 * Thrown by {@link claimRun} when its worker closed while it waited to take a run over, and by
 * executeRun for a run its worker's shutdown stopped before it emitted anything: the job goes
 * back to the queue (see agentRunProcessor) for another worker, which takes the run over.
 */
export class RunHandedBack extends Error {
  override name = "RunHandedBack";
  constructor(readonly runId: string) {
    super(`run ${runId} handed back: its worker is closing`);
  }
}

/**
 * Thrown by executeRun when PostgreSQL or Redis was out of reach before the run emitted anything
 * (its claim, or reading its agent): the job goes back to the queue for a while without using up
 * one of its attempts (see agentRunProcessor), so that an outage of a few seconds, before the
 * worker's own database check notices it, does not fail the run for good.
 */
export class RunNotStarted extends Error {
  override name = "RunNotStarted";
  constructor(
    readonly runId: string,
    override readonly cause: unknown,
  ) {
    super(`run ${runId} could not start: ${(cause as Error)?.message ?? String(cause)}`);
  }
}

const toClaimed = (row: ClaimRow, lastSeq: number): ClaimedRun => ({
  lastSeq,
  elapsedMs: Math.max(0, Number(row.elapsed_ms ?? 0)),
  run: { id: row.id, taskId: row.task_id, orgId: row.org_id, agentId: row.agent_id, query: row.query, context: row.context, taskUserId: row.task_user_id },
  history: row.history,
});

/**
 * Takes a run for execution. A queued run is claimed with a conditional update. A run found
 * `running` was left by a worker that stopped (BullMQ handed its job over): it is restarted if
 * it emitted nothing yet and no cancel is recorded on it, and ended otherwise: failed
 * (`worker_lost`), or cancelled when a cancel was asked for while its worker was gone; a worker
 * found alive after all (it sets its heartbeat again) keeps it. Returns null when there is
 * nothing to do; the job is then acknowledged quietly.
 * The wait for a stopped worker's heartbeat to lapse (up to two heartbeat TTLs) ends when
 * `closing` aborts: {@link RunHandedBack} is thrown then, before this worker has taken anything.
 * `log` is the run's logger (bound to its id).
 */
export async function claimRun(deps: RunDeps, runId: string, closing: AbortSignal = new AbortController().signal, log: Logger = deps.logger.child({ runId })): Promise<ClaimedRun | null> {
  const { prisma, redis, redisPrefix } = deps;
  const hbKey = runHeartbeatKey(redisPrefix, runId);
  const historyLimit = deps.config.HISTORY_MAX_MESSAGES;
  // The history is cut to HISTORY_MAX_CHARS later (recentHistory); PostgreSQL already leaves out
  // what that cut cannot keep, by the size of the messages as stored.
  const historyChars = deps.config.HISTORY_MAX_CHARS;
  // One round trip claims the run, moves its task to running and returns what execution needs
  // (the agentrun_claim_run migration).
  const [claimed] = await prisma.$queryRaw<ClaimRow[]>`SELECT * FROM agentrun_claim_run(${runId}, ${deps.workerId}, ${historyLimit}::integer, ${historyChars}::integer)`;
  if (claimed) {
    // Not awaited: the heartbeat is only read once this worker's job lock has lapsed, and the
    // periodic renewal sets it again should this write fail. The writer key tells whoever takes
    // the run over whether Redis lost the run's state meanwhile (the first append sets it too);
    // only if missing: a taker that got there first keeps the run.
    redis.set(hbKey, deps.workerId, "PX", deps.heartbeatTtlMs).catch(() => {});
    redis.set(runWriterKey(redisPrefix, runId), deps.workerId, "EX", RUN_LOG_TTL_LIVE_S, "NX").catch(() => {});
    return toClaimed(claimed, 1);
  }
  const run = await prisma.run.findUnique({ where: { id: runId }, select: { status: true, query: true, workerId: true } });
  if (!run || run.status !== "running") return null;
  if (closing.aborted) throw new RunHandedBack(runId);
  // BullMQ hands the job over once the previous worker's lock expired; that worker's run
  // heartbeat lives about as long, so wait for it to lapse. Whoever sets it first owns the run;
  // a heartbeat that keeps being renewed means its worker is alive and still executing it.
  let owned = await redis.set(hbKey, deps.workerId, "PX", deps.heartbeatTtlMs, "NX");
  if (owned !== "OK") {
    const left = await redis.pttl(hbKey);
    await pause(Math.min(Math.max(left, 0) + 50, 2 * deps.heartbeatTtlMs), closing);
    if (closing.aborted) throw new RunHandedBack(runId);
    owned = await redis.set(hbKey, deps.workerId, "PX", deps.heartbeatTtlMs, "NX");
  }
  if (owned !== "OK" || !(await stillOwned(deps, hbKey, runId, closing))) return null;
  // Take the run over before reading what it emitted, so that the previous worker, should it
  // still be alive (a long pause), can add nothing more: its batches need the run under its id
  // (waiting for one in progress), its log appends the run's writer key (see finishRun).
  const [row] = await prisma.$queryRaw<ClaimRow[]>`
    UPDATE runs SET worker_id = ${deps.workerId} FROM tasks WHERE runs.id = ${runId} AND runs.status = 'running' AND tasks.id = runs.task_id
    RETURNING runs.id, runs.task_id, runs.org_id, runs.agent_id, runs.query, runs.context, tasks.user_id AS task_user_id,
      agentrun_task_history(runs.task_id, runs.id, ${historyLimit}::integer, ${historyChars}::integer) AS history,
      (extract(epoch FROM clock_timestamp() - runs.started_at) * 1000)::float8 AS elapsed_ms,
      runs.cancel_requested_at IS NOT NULL AS cancel_requested`;
  if (!row) return null;
  // (A missing writer key is not taken for a lost Redis here: a worker killed between its claim
  // and the key's write leaves it missing too, and its job lives in the same Redis, so a Redis
  // that lost the key has most likely lost the job with it.)
  await takeOverRunWriter(redis, runWriterKey(redisPrefix, runId), deps.workerId, RUN_LOG_TTL_LIVE_S);
  const stored = await readStoredEvents({ prisma, redis, redisPrefix }, runId);
  const lastSeq = stored.at(-1)?.seq ?? 1;
  // A cancel recorded on the row while no worker had the run ends it here, as it would any run
  // found abandoned: its Redis flag, which the restarted run would read, may be lost.
  if (lastSeq <= 1 && !row.cancel_requested) {
    log.warn({ previousWorker: run.workerId }, "restarting a run whose worker stopped before it emitted anything");
    return toClaimed(row, lastSeq);
  }
  // Logged as the sweeper logs the runs it ends: the run's end is this worker's doing.
  if (await endAbandonedRun(deps, { id: runId, query: run.query }, WORKER_LOST)) log.warn({ previousWorker: run.workerId }, "ended a run whose worker stopped");
  await redis.del(hbKey);
  return null;
}

/**
 * Whether the heartbeat this worker just set is still its own after a whole renewal period (a
 * third of its TTL) and some. A heartbeat that lapsed need not mean a dead worker: a Redis outage
 * longer than the TTL lets the heartbeat and the job's lock expire while the worker goes on, and
 * its stalled job is handed over once Redis is back. A live worker sets its heartbeat again
 * within the period, over this one; the run is then left to it.
 */
async function stillOwned(deps: RunDeps, hbKey: string, runId: string, closing: AbortSignal): Promise<boolean> {
  await waitOneRenewal(deps.heartbeatTtlMs, closing);
  if (closing.aborted) {
    // The worker that gets the job next need not wait for this heartbeat to lapse.
    await releaseRunHeartbeatIfHeld(deps.redis, hbKey, deps.workerId).catch(() => {});
    throw new RunHandedBack(runId);
  }
  // A whole TTL again from now (the run's renewals start only once it is claimed), in the same
  // step as the check: a live worker renewing at that very moment keeps its heartbeat.
  return renewRunHeartbeatIfHeld(deps.redis, hbKey, deps.workerId, deps.heartbeatTtlMs);
}
