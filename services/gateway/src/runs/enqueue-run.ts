import { AppError } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { enqueueRun } from "@agentrun/queue";
import { finishRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";

/**
 * Queues a run that `createRun` has just recorded. When the queue cannot take it, the run is
 * failed at once (its reservation released, the user's query kept in the task's history) and
 * the caller gets 503 `unavailable`: nothing would ever pick the run up.
 */
export async function enqueueCreatedRun(deps: GatewayDeps, log: Logger, run: { runId: string; query: string }): Promise<void> {
  try {
    await enqueueRun(deps.queue, { runId: run.runId });
  } catch (err) {
    log.error({ err }, "could not enqueue run");
    const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };
    await finishRun(store, {
      runId: run.runId,
      status: "failed",
      error: { code: "unavailable", message: "The run queue is unavailable." },
      messages: [{ role: "user", content: run.query }],
    }).catch((e) => log.error({ err: e }, "could not fail the unqueued run"));
    throw new AppError("unavailable", { message: "The run queue is unavailable; retry shortly.", cause: err });
  }
}
