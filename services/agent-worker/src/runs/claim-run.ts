import { readStoredEvents, runHeartbeatKey } from "@agentrun/events";
import { finishRun } from "@agentrun/run-state";
import type { RunDeps } from "./run-deps";

export const RUN_HEARTBEAT_TTL_MS = 10_000;

export interface ClaimedRun {
  /** Seq of the last event already stored (1: only run_started). */
  lastSeq: number;
}

/**
 * Takes a run for execution. A queued run is claimed with a conditional update. A run found
 * `running` was left by a worker that stopped (BullMQ handed its job over): it is restarted if
 * it emitted nothing yet, and ended as failed (`worker_lost`) otherwise. Returns null when there
 * is nothing to do; the job is then acknowledged quietly.
 */
export async function claimRun(deps: RunDeps, runId: string): Promise<ClaimedRun | null> {
  const { prisma, redis, redisPrefix } = deps;
  const hbKey = runHeartbeatKey(redisPrefix, runId);
  const claimed = await prisma.run.updateMany({ where: { id: runId, status: "queued" }, data: { status: "running", startedAt: new Date(), workerId: deps.workerId } });
  if (claimed.count === 1) {
    await redis.set(hbKey, deps.workerId, "PX", RUN_HEARTBEAT_TTL_MS);
    await prisma.task.updateMany({ where: { activeRunId: runId }, data: { status: "running" } });
    return { lastSeq: 1 };
  }
  const run = await prisma.run.findUnique({ where: { id: runId }, select: { status: true, query: true } });
  if (!run || run.status !== "running") return null;
  // Whoever sets the heartbeat first owns the orphaned run; a live worker still holds it.
  const owned = await redis.set(hbKey, deps.workerId, "PX", RUN_HEARTBEAT_TTL_MS, "NX");
  if (owned !== "OK") return null;
  const stored = await readStoredEvents({ prisma, redis, redisPrefix }, runId);
  const lastSeq = stored.at(-1)?.seq ?? 1;
  if (lastSeq <= 1) {
    deps.logger.warn({ runId }, "restarting a run whose worker stopped before it emitted anything");
    await prisma.run.update({ where: { id: runId }, data: { workerId: deps.workerId } });
    return { lastSeq };
  }
  await finishRun(
    { prisma, redis, redisPrefix },
    { runId, status: "failed", error: { code: "worker_lost", message: "The worker executing the run stopped." }, messages: [{ role: "user", content: run.query }] },
  );
  await redis.del(hbKey);
  return null;
}
