import { runHeartbeatKey } from "@agentrun/events";
import { isUnavailableError } from "@agentrun/errors";
import { endAbandonedRun } from "@agentrun/run-state";
import { waitOneRenewal } from "./heartbeat-renewal";
import type { RunDeps } from "./run-deps";
import { finalFailureOf } from "./run-failure";

/**
 * Ends the run of a job that failed for good (infrastructure errors on every attempt, or BullMQ
 * gave up on a job whose lock kept lapsing), so that it does not stay open. A queued run whose
 * claim failed for an outage is left to the queued-run sweep, which queues it again, or ends it
 * once it is older than QUEUED_MAX_AGE_MS. A running run whose heartbeat another worker
 * keeps is that worker's: the job may have failed here (a takeover that could not reach Redis)
 * while the run goes on there; so is one whose worker sets its heartbeat again within a renewal
 * period (a Redis outage longer than the heartbeat's TTL let it lapse). So is a run this process
 * is still executing (`executing`): BullMQ fails a job that stalled too often from whichever
 * worker's stall check finds it, its own worker's included. Such runs are left to their worker,
 * and to the sweeper should it stop. So is a run whose decision this worker's shutdown (`stopping`)
 * cut short: the orphan sweep of the workers left ends it once its heartbeat has lapsed. Returns
 * whether this ended the run.
 */
export async function endRunOfFailedJob(
  deps: Pick<RunDeps, "prisma" | "redis" | "redisPrefix" | "workerId" | "logger" | "heartbeatTtlMs">,
  runId: string,
  err: Error,
  executing: (runId: string) => boolean = () => false,
  stopping?: AbortSignal,
): Promise<boolean> {
  const { prisma, redis, redisPrefix } = deps;
  if (executing(runId)) {
    deps.logger.warn({ runId, err: err.message }, "the run's job failed, but this worker is still executing the run: leaving it running");
    return false;
  }
  const run = await prisma.run.findUnique({ where: { id: runId }, select: { query: true, status: true } });
  if (!run) return false;
  // Its claim failed for an outage (PostgreSQL slow or away through every attempt): queued again
  // later. Failed otherwise (a claim PostgreSQL refuses each time would fail again): ended now.
  if (run.status === "queued" && isUnavailableError(err)) return false;
  if (run.status === "running") {
    if (await executedElsewhere(deps, runId, stopping)) {
      deps.logger.warn({ runId, err: err.message }, "the run's job failed here, but another worker is executing the run: leaving it to that worker");
      return false;
    }
    if (stopping?.aborted) {
      deps.logger.warn({ runId, err: err.message }, "the run's job failed as this worker stops: leaving the run to the orphan sweep");
      return false;
    }
  }
  const ended = await endAbandonedRun({ prisma, redis, redisPrefix }, { id: runId, query: run.query }, finalFailureOf(err));
  if (ended) deps.logger.error({ runId, err: err.message }, "run failed after all attempts");
  return ended;
}

/**
 * Whether another worker keeps the run's heartbeat, now or within a renewal period (a third of
 * its TTL, and some): a live worker whose heartbeat lapsed sets it again within that time.
 */
async function executedElsewhere(deps: Pick<RunDeps, "redis" | "redisPrefix" | "workerId" | "heartbeatTtlMs">, runId: string, stopping?: AbortSignal): Promise<boolean> {
  const hbKey = runHeartbeatKey(deps.redisPrefix, runId);
  const elsewhere = (beat: string | null) => beat !== null && beat !== deps.workerId;
  if (elsewhere(await deps.redis.get(hbKey))) return true;
  await waitOneRenewal(deps.heartbeatTtlMs, stopping);
  return !stopping?.aborted && elsewhere(await deps.redis.get(hbKey));
}
