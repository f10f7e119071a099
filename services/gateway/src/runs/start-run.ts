import type { Request, Response } from "express";
import type { RunEvent } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { enqueueRun } from "@agentrun/queue";
import { finishRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import { respondWithRun } from "./respond-run";
import { openSse } from "./sse";

export interface CreatedRunToStart {
  runId: string;
  taskId: string;
  query: string;
  /** The run's run_started event, as `createRun` stored it. */
  started: RunEvent;
  stream: boolean;
  /** Fields added to the JSON answers (see `respondWithRun`). */
  extra?: Record<string, unknown>;
}

/**
 * Queues a run that `createRun` has just recorded and answers with it. A streaming client gets
 * `run_started` at once, before the run is queued: the run is committed, so it is accepted (if
 * the queue cannot take it, the run is failed with `unavailable` and the stream carries that
 * terminal event). A JSON client gets 503 `unavailable` in that case.
 */
export async function startCreatedRun(deps: GatewayDeps, req: Request, res: Response, run: CreatedRunToStart): Promise<void> {
  const log = req.log.child({ runId: run.runId, taskId: run.taskId });
  const sse = run.stream ? openSse(req, res, deps.config.SSE_HEARTBEAT_MS) : undefined;
  sse?.send(run.started);
  let queued = true;
  try {
    await enqueueCreatedRun(deps, log, run);
  } catch (err) {
    if (!sse) throw err;
    queued = false;
  }
  await respondWithRun(deps, req, res, { runId: run.runId, taskId: run.taskId, stream: run.stream, sent: [run.started], fresh: queued, sse, extra: run.extra });
}

/**
 * Queues a run that `createRun` has just recorded. When the queue cannot take it, the run is
 * failed at once (its reservation released, the user's query kept in the task's history) and
 * this throws 503 `unavailable`: nothing would ever pick the run up.
 */
async function enqueueCreatedRun(deps: GatewayDeps, log: Logger, run: { runId: string; query: string }): Promise<void> {
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
