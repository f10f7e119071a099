import { runHeartbeatKey } from "@agentrun/events";
import { endAbandonedRun } from "@agentrun/run-state";
import type { RunDeps } from "./run-deps";
import { finalFailureOf } from "./run-failure";

/**
 * Ends the run of a job that failed for good (infrastructure errors on every attempt, or BullMQ
 * gave up on a job whose lock kept lapsing), so that it does not stay open. A running run whose
 * heartbeat another worker keeps is that worker's: the job may have failed here (a takeover that
 * could not reach Redis) while the run goes on there. So is a run this process is still executing
 * (`executing`): BullMQ fails a job that stalled too often from whichever worker's stall check
 * finds it, its own worker's included. Such runs are left to their worker, and to the sweeper
 * should it stop. Returns whether this ended the run.
 */
export async function endRunOfFailedJob(
  deps: Pick<RunDeps, "prisma" | "redis" | "redisPrefix" | "workerId" | "logger">,
  runId: string,
  err: Error,
  executing: (runId: string) => boolean = () => false,
): Promise<boolean> {
  const { prisma, redis, redisPrefix } = deps;
  if (executing(runId)) {
    deps.logger.warn({ runId, err: err.message }, "the run's job failed, but this worker is still executing the run: leaving it running");
    return false;
  }
  const run = await prisma.run.findUnique({ where: { id: runId }, select: { query: true, status: true } });
  if (!run) return false;
  if (run.status === "running") {
    const beat = await redis.get(runHeartbeatKey(redisPrefix, runId));
    if (beat !== null && beat !== deps.workerId) {
      deps.logger.warn({ runId, worker: beat, err: err.message }, "the run's job failed here, but another worker is executing the run: leaving it to that worker");
      return false;
    }
  }
  const ended = await endAbandonedRun({ prisma, redis, redisPrefix }, { id: runId, query: run.query }, finalFailureOf(err));
  if (ended) deps.logger.error({ runId, err: err.message }, "run failed after all attempts");
  return ended;
}
