import { readStoredEvents, runCancelKey, runHeartbeatKey } from "@agentrun/events";
import { requeueRun, type AgentRunJob, type Queue } from "@agentrun/queue";
import { isUnavailableError } from "@agentrun/errors";
import { endAbandonedRun, failRun } from "@agentrun/run-state";
import type { RunDeps } from "./run-deps";
import { WORKER_LOST } from "./run-failure";

/** Job states in which BullMQ still owns the job and will deliver it (again) to a worker. */
const LIVE_JOB_STATES = new Set(["active", "waiting", "delayed", "prioritized", "waiting-children"]);

/** Runs seen without heartbeat and job, with when they were first seen so (per worker process). */
const suspects = new Map<string, number>();

/**
 * Ends runs left `running` by a worker that died when no other worker can take over their job
 * (BullMQ failed it or lost it): a running run without heartbeat, older than
 * RUN_STALE_AFTER_MS, whose job is not live is failed with `worker_lost` (or cancelled, when a
 * cancel was asked for and reached no live worker), so no run stays
 * running forever and every stream gets its end. While the job is live, BullMQ's stall
 * detection hands it to another worker, which restarts or ends the run itself; but a run whose
 * cancel was asked for, or which emitted events, is ended here all the same once no worker holds
 * its job, as cancelled or worker_lost (its job, once a worker takes it, finds the run ended):
 * with every worker busy, the job could wait for a free one for as long as the longest run.
 *
 * A run is ended only once it has gone without heartbeat for a whole heartbeat TTL: a Redis
 * restart that lost its data (or an outage longer than the TTL) also loses the heartbeats of runs
 * whose workers are alive, and those workers set their heartbeat again within a third of that
 * time of reconnecting, which need not be when this worker reconnected.
 */
export async function sweepOrphanedRuns(deps: RunDeps, queue: Queue<AgentRunJob>): Promise<number> {
  const { prisma } = deps;
  const cutoff = new Date(Date.now() - deps.config.RUN_STALE_AFTER_MS);
  const { rows: candidates, complete } = await allPages((after?: { id: string; startedAt: Date | null }) =>
    prisma.run.findMany({
      where: { status: "running", startedAt: { lt: cutoff }, ...(after && { OR: [{ startedAt: { gt: after.startedAt! } }, { startedAt: after.startedAt, id: { gt: after.id } }] }) },
      select: { id: true, query: true, startedAt: true },
      orderBy: [{ startedAt: "asc" }, { id: "asc" }],
      take: PAGE_SIZE,
    }),
  );
  const now = Date.now();
  // Runs no longer running (or back with a heartbeat) are suspects no more; a sweep cut short
  // by its page limit did not look at every run, and forgets none.
  const seen = new Set(candidates.map((r) => r.id));
  if (complete) for (const id of suspects.keys()) if (!seen.has(id)) suspects.delete(id);
  return sweepEach(deps, candidates, "a run", (run) => endIfOrphaned(deps, queue, run, now));
}

/**
 * Hands each run to `handle` in turn and counts those it handled. One run it cannot handle does
 * not keep the sweep from the others (it is logged, as `what`); an outage ends the sweep.
 */
async function sweepEach<T extends { id: string }>(deps: RunDeps, runs: T[], what: string, handle: (run: T) => Promise<boolean>): Promise<number> {
  let handled = 0;
  for (const run of runs) {
    try {
      if (await handle(run)) handled++;
    } catch (err) {
      if (isUnavailableError(err)) throw err;
      deps.logger.warn({ runId: run.id, err: (err as Error).message }, `could not sweep ${what}`);
    }
  }
  return handled;
}

async function endIfOrphaned(deps: RunDeps, queue: Queue<AgentRunJob>, run: { id: string; query: string }, now: number): Promise<boolean> {
  const { redis, redisPrefix } = deps;
  // A run does not wait for its job to reach a free worker (every worker busy with long runs)
  // when that worker could only end it: once it was cancelled while its worker was gone, or once
  // it has emitted events (a worker taking its job over ends it worker_lost, see claimRun). It is
  // ended here once its heartbeat has stayed gone. A job a worker holds (active) is left to it.
  const waitsForItsJob = async () => {
    const state = await jobState(queue, run.id);
    if (state === null || !LIVE_JOB_STATES.has(state) || (await redis.exists(runCancelKey(redisPrefix, run.id)))) return false;
    return state === "active" || (await readStoredEvents(deps, run.id, 1)).length === 0;
  };
  if (await redis.exists(runHeartbeatKey(redisPrefix, run.id))) {
    suspects.delete(run.id);
    return false;
  }
  // The heartbeat's absence is timed from when it was first seen, whatever the job does meanwhile.
  const since = suspects.get(run.id) ?? now;
  suspects.set(run.id, since);
  if (await waitsForItsJob()) return false;
  if (now - since < deps.heartbeatTtlMs) return false;
  // One sweeper per orphan, whichever worker gets there first.
  const lock = await redis.set(`${redisPrefix}:sweep:${run.id}`, deps.workerId, "EX", 60, "NX");
  if (lock !== "OK") return false;
  suspects.delete(run.id);
  const ended = await endAbandonedRun(deps, run, WORKER_LOST);
  if (ended) deps.logger.warn({ runId: run.id }, "ended a run whose worker stopped");
  return ended;
}

/** Rows per page, and pages per sweep: a sweep looks at up to 2,000 runs, oldest first. */
const PAGE_SIZE = 100;
const MAX_PAGES = 20;

/**
 * Every row `fetch` pages through (up to MAX_PAGES pages of PAGE_SIZE), so that a sweep also
 * reaches runs behind a first page full of live ones (long runs, or a backlog of runs waiting in
 * the queue). Each page is asked for as the rows after the last one read (`after`), by their
 * ordering key, so that a row that changed meanwhile ends no page early. `complete`: every
 * row was read.
 */
async function allPages<T>(fetch: (after?: T) => Promise<T[]>): Promise<{ rows: T[]; complete: boolean }> {
  const rows: T[] = [];
  for (let n = 0; n < MAX_PAGES; n++) {
    const page = await fetch(rows.at(-1));
    rows.push(...page);
    if (page.length < PAGE_SIZE) return { rows, complete: true };
  }
  return { rows, complete: false };
}

/** Whether BullMQ still owns the run's job (see LIVE_JOB_STATES). */
async function jobIsLive(queue: Queue<AgentRunJob>, runId: string): Promise<boolean> {
  const state = await jobState(queue, runId);
  return state !== null && LIVE_JOB_STATES.has(state);
}

/** The state of the run's job, or null when the queue no longer has it. */
async function jobState(queue: Queue<AgentRunJob>, runId: string): Promise<string | null> {
  const job = await queue.getJob(runId);
  return job ? await job.getState() : null;
}

/**
 * Puts queued runs whose job is gone or failed for good (PostgreSQL or Redis was down through
 * every attempt) back on the queue, so that they run once the outage is over. Such a run older
 * than QUEUED_MAX_AGE_MS is ended instead (`unavailable`): its caller has long given up, and
 * re-running hours-old requests after an outage would surprise everyone.
 */
export async function reviveQueuedRuns(deps: RunDeps, queue: Queue<AgentRunJob>): Promise<number> {
  const now = Date.now();
  const cutoff = new Date(now - deps.config.QUEUED_STALE_AFTER_MS);
  const { rows: stale } = await allPages((after?: { id: string; createdAt: Date }) =>
    deps.prisma.run.findMany({
      where: { status: "queued", createdAt: { lt: cutoff }, ...(after && { OR: [{ createdAt: { gt: after.createdAt } }, { createdAt: after.createdAt, id: { gt: after.id } }] }) },
      select: { id: true, query: true, createdAt: true },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      take: PAGE_SIZE,
    }),
  );
  return sweepEach(deps, stale, "a queued run", (run) => reviveQueuedRun(deps, queue, run, now));
}

/** Ends a queued run too old to start now whose job is gone, or queues it again. */
async function reviveQueuedRun(deps: RunDeps, queue: Queue<AgentRunJob>, run: { id: string; query: string; createdAt: Date }, now: number): Promise<boolean> {
  if (now - run.createdAt.getTime() > deps.config.QUEUED_MAX_AGE_MS) {
    if (await jobIsLive(queue, run.id)) return false;
    const error = { code: "unavailable", message: "The run was never executed: its queue entry was lost and it is too old to start now." };
    const ended = await failRun(deps, run, error, { onlyIfQueued: true });
    if (ended) deps.logger.warn({ runId: run.id }, "ended a queued run whose job was lost long ago");
    return ended;
  }
  const outcome = await requeueRun(queue, run.id);
  if (outcome === "pending") return false;
  deps.logger.warn({ runId: run.id, outcome }, "re-queued a run whose job was lost");
  return true;
}
