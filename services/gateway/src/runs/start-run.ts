import type { Request, Response } from "express";
import { EarlyRunSubscription } from "@agentrun/events";
import { AppError } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { enqueueRun } from "@agentrun/queue";
import { failRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import type { CreatedRun } from "./create-run";
import { respondWithRun } from "./respond-run";
import { openSse } from "./sse";

export interface RunToStart {
  /** The id the run will have (see `newRunIds`): its channel is subscribed to before it exists. */
  runId: string;
  /** Records the run (`createRun`); a refusal is thrown to the client as it is. */
  create: () => Promise<CreatedRun>;
  query: string;
  stream: boolean;
  /** Fields added to the JSON answers (see `respondWithRun`). */
  extra?: Record<string, unknown>;
  /** Called when the queue could not take the run and it was failed (e.g. to free an Idempotency-Key). */
  unqueued?: () => Promise<void>;
}

/**
 * Records a run, queues it and answers with it. The run's channel is subscribed to while the run
 * is being recorded, and the job is queued only once that subscription is confirmed, so no
 * event can be published before the gateway listens and the stream needs no first read of the
 * store. A streaming client gets `run_started` as soon as the run is committed, before it is
 * queued: the run is accepted (if the queue cannot take it, the run is failed with `unavailable`
 * and the stream carries that terminal event). A JSON client gets 503 `unavailable` then.
 */
export async function startRun(deps: GatewayDeps, req: Request, res: Response, run: RunToStart): Promise<void> {
  const early = new EarlyRunSubscription(deps.hub, deps.config.REDIS_PREFIX, run.runId);
  let created: CreatedRun;
  try {
    created = await run.create();
  } catch (err) {
    early.close();
    throw err;
  }
  const { runId, taskId, started } = created;
  const log = req.log.child({ runId, taskId });
  const sse = run.stream ? openSse(req, res, deps.config.SSE_HEARTBEAT_MS) : undefined;
  sse?.send(started);
  // Redis down: the queue cannot take the run either, and the reader subscribes on its own.
  const listening = await early.ready.then(() => true, () => false);
  let queued = true;
  try {
    await enqueueCreatedRun(deps, log, { runId, query: run.query, unqueued: run.unqueued });
  } catch (err) {
    if (!sse) {
      early.close();
      throw err;
    }
    queued = false;
  }
  await respondWithRun(deps, req, res, {
    runId,
    taskId,
    stream: run.stream,
    sent: [started],
    fresh: queued,
    subscription: listening ? early : undefined,
    sse,
    extra: run.extra,
  });
}

/**
 * Queues a run that `createRun` has just recorded. When the queue cannot take it, the run is
 * failed at once (its reservation released, the user's query kept in the task's history) and
 * this throws 503 `unavailable`: nothing would ever pick the run up.
 */
async function enqueueCreatedRun(deps: GatewayDeps, log: Logger, run: Pick<RunToStart, "runId" | "query" | "unqueued">): Promise<void> {
  try {
    await enqueueRun(deps.queue, { runId: run.runId });
  } catch (err) {
    log.error({ err }, "could not enqueue run");
    const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };
    // Only while queued: the add may have reached Redis after all and a worker claimed the run.
    const ended = await failRun(store, { id: run.runId, query: run.query }, { code: "unavailable", message: "The run queue is unavailable." }, { onlyIfQueued: true }).catch((e) => {
      log.error({ err: e }, "could not fail the unqueued run");
      return true;
    });
    if (!ended) return;
    await run.unqueued?.().catch((e) => log.error({ err: e }, "could not release what the unqueued run held"));
    throw new AppError("unavailable", { message: "The run queue is unavailable; retry shortly.", cause: err });
  }
}
