import { runHeartbeatKey } from "@agentrun/events";
import { finishRun } from "@agentrun/run-state";
import { requeueRun, type AgentRunJob, type Queue } from "@agentrun/queue";
import type { RunDeps } from "./run-deps";

/**
 * Ends runs left `running` by a worker that died when no other worker took over their job:
 * a running run whose heartbeat has been missing for longer than RUN_STALE_AFTER_MS is
 * failed with `worker_lost`, so no run stays running forever and every stream gets its end.
 */
export async function sweepOrphanedRuns(deps: RunDeps): Promise<number> {
  const { prisma, redis, redisPrefix } = deps;
  const cutoff = new Date(Date.now() - deps.config.RUN_STALE_AFTER_MS);
  const candidates = await prisma.run.findMany({
    where: { status: "running", startedAt: { lt: cutoff } },
    select: { id: true, query: true },
    take: 100,
    orderBy: { startedAt: "asc" },
  });
  let ended = 0;
  for (const run of candidates) {
    if (await redis.exists(runHeartbeatKey(redisPrefix, run.id))) continue;
    // One sweeper per orphan, whichever worker gets there first.
    const lock = await redis.set(`${redisPrefix}:sweep:${run.id}`, deps.workerId, "EX", 60, "NX");
    if (lock !== "OK") continue;
    const terminal = await finishRun(
      { prisma, redis, redisPrefix },
      { runId: run.id, status: "failed", error: { code: "worker_lost", message: "The worker executing the run stopped." }, messages: [{ role: "user", content: run.query }] },
    );
    if (terminal) {
      ended++;
      deps.logger.warn({ runId: run.id }, "ended a run whose worker stopped");
    }
  }
  return ended;
}

/**
 * Puts queued runs whose job is gone or failed for good (PostgreSQL or Redis was down through
 * every attempt) back on the queue, so that they run once the outage is over.
 */
export async function reviveQueuedRuns(deps: RunDeps, queue: Queue<AgentRunJob>): Promise<number> {
  const cutoff = new Date(Date.now() - deps.config.QUEUED_STALE_AFTER_MS);
  const stale = await deps.prisma.run.findMany({ where: { status: "queued", createdAt: { lt: cutoff } }, select: { id: true }, take: 100, orderBy: { createdAt: "asc" } });
  let revived = 0;
  for (const run of stale) {
    const outcome = await requeueRun(queue, run.id);
    if (outcome !== "pending") {
      revived++;
      deps.logger.warn({ runId: run.id, outcome }, "re-queued a run whose job was lost");
    }
  }
  return revived;
}
