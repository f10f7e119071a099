import type { Request, Response } from "express";
import type { RunEvent } from "@agentrun/contracts";
import { EarlyRunSubscription } from "@agentrun/events";
import { AppError, mayHaveBeenCarriedOut } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { enqueueRun } from "@agentrun/queue";
import { finishRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import { recordRun } from "../middleware/request-id.middleware";
import { AbandonedRuns } from "./abandoned-runs";
import type { CreatedRun } from "./create-run";
import { UNQUEUED_CODE } from "./idempotency";
import { respondWithRun } from "./respond-run";
import { openSse } from "./sse";
import { trackRunStart } from "../shutdown";

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

/** How long ending a run the queue could not take is retried while PostgreSQL is unreachable. */
const UNQUEUED_FAIL_RETRY_MS = 2000;

const UNQUEUED = { code: UNQUEUED_CODE, message: "The run queue is unavailable." } as const;

/**
 * What became of a just-created run: queued (or claimed by a worker all the same), or held: the
 * queue could not take it and it could not be ended either, so it stays queued with its
 * reservation (and its Idempotency-Key) until the workers queue it again (`reviveQueuedRuns`).
 */
type Enqueued = "queued" | "held";

/**
 * Records a run, queues it and answers with it. The run's channel is subscribed to while the run
 * is being recorded, and the job is queued only once that subscription is confirmed, so no
 * event can be published before the gateway listens and the stream needs no first read of the
 * store. A streaming client gets `run_started` as soon as the run is committed, before it is
 * queued: the run is accepted (if the queue cannot take it, the run is failed with `unavailable`
 * and the stream carries that terminal event). A JSON client gets 503 `unavailable` then. A run
 * that can be neither queued nor failed is accepted all the same, since the workers will queue it
 * again: the stream follows it, and a JSON client gets 202 with its status `queued`.
 */
export function startRun(deps: GatewayDeps, req: Request, res: Response, run: RunToStart): Promise<void> {
  // A stopping gateway waits for it: a run is not left recorded and unqueued, its caller unanswered.
  return trackRunStart(recordQueueAndAnswer(deps, req, res, run));
}

async function recordQueueAndAnswer(deps: GatewayDeps, req: Request, res: Response, run: RunToStart): Promise<void> {
  const early = new EarlyRunSubscription(deps.hub, deps.config.REDIS_PREFIX, run.runId);
  let created: CreatedRun;
  try {
    created = await run.create();
  } catch (err) {
    early.close();
    if (mayHaveBeenCarriedOut(err)) abandonRun(deps, req.log, run);
    throw err;
  }
  const { runId, taskId, started } = created;
  recordRun(res, created);
  const sse = run.stream ? openSse(req, res, deps.config.SSE_HEARTBEAT_MS) : undefined;
  sse?.send(started);
  // Redis down: the queue cannot take the run either, and the reader subscribes on its own. The
  // subscriber connection holds a SUBSCRIBE until Redis is back, so the wait is bounded.
  const listening = await subscribed(early);
  if (!listening) early.close();
  let enqueued: Enqueued;
  try {
    enqueued = await enqueueCreatedRun(deps, req, { runId, taskId, query: run.query, unqueued: run.unqueued });
  } catch (err) {
    early.close();
    if (!sse || !(err instanceof UnqueuedRunError)) throw err;
    // The run's end is known: the stream ends with it, whether Redis (its publish) is up or not.
    sse.send(err.terminal);
    return;
  }
  if (enqueued === "held" && !sse) {
    early.close();
    res.status(202).json({ run_id: runId, task_id: taskId, status: "queued", ...run.extra });
    return;
  }
  await respondWithRun(deps, req, res, {
    runId,
    taskId,
    stream: run.stream,
    sent: [started],
    // Held or queued, the run is this request's own: its events after run_started reach its
    // Redis log first, so the stream needs no first read of PostgreSQL (which, for a held run,
    // has just failed to end it and likely fails that read too).
    fresh: true,
    subscription: listening ? early : undefined,
    sse,
    extra: run.extra,
  });
}

/** The longest wait for Redis to confirm the early subscription (the queue's own limit). */
const SUBSCRIBE_TIMEOUT_MS = 2000;

/** Whether Redis confirmed `early` within SUBSCRIBE_TIMEOUT_MS. */
async function subscribed(early: EarlyRunSubscription): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), SUBSCRIBE_TIMEOUT_MS)));
  try {
    return await Promise.race([early.ready.then(() => true, () => false), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Queues a run that `createRun` has just recorded, with the id of the request that started it
 * (the worker's lines about the run carry it). When the queue cannot take it, the run is
 * failed at once (its reservation released, the user's query kept in the task's history) and
 * this throws 503 `unavailable`: nothing would ever pick the run up. When it cannot be failed
 * either, it is left queued and held (see {@link Enqueued}): it is still going to run.
 */
async function enqueueCreatedRun(deps: GatewayDeps, req: Request, run: Pick<RunToStart, "runId" | "query" | "unqueued"> & { taskId: string }): Promise<Enqueued> {
  try {
    await enqueueRun(deps.queue, { runId: run.runId, requestId: req.id });
    return "queued";
  } catch (err) {
    // (A child logger only here: making one for every run was a visible share of the gateway's CPU.)
    const log = req.log.child({ runId: run.runId, taskId: run.taskId });
    log.error({ err }, "could not enqueue run");
    let terminal: RunEvent | null;
    try {
      terminal = await failUnqueuedRun(deps, run);
    } catch (e) {
      log.error({ err: e }, "could not fail the unqueued run: it stays queued for the workers to queue again");
      return "held";
    }
    // Not queued any more: the add reached Redis after all and a worker claimed the run.
    if (!terminal) return "queued";
    await run.unqueued?.().catch((e) => log.error({ err: e }, "could not release what the unqueued run held"));
    throw new UnqueuedRunError(terminal, run, err);
  }
}

/**
 * 503 `unavailable` for a run the queue could not take, with the terminal event it was ended with.
 * Its details name the run and its task, which hold the failed run and the user's query: a retry
 * under the same task adds the query to its history again.
 */
class UnqueuedRunError extends AppError {
  constructor(
    readonly terminal: RunEvent,
    run: { runId: string; taskId: string },
    cause: unknown,
  ) {
    super("unavailable", { message: "The run queue is unavailable; retry shortly.", details: { run_id: run.runId, task_id: run.taskId }, cause });
  }
}

/** The runs whose creation went unanswered, watched together, per gateway. */
const abandonedRuns = new WeakMap<GatewayDeps, AbandonedRuns>();

/** Watches a run whose creation went unanswered until it is ended or its watch is over (see {@link AbandonedRuns}). */
function abandonRun(deps: GatewayDeps, log: Logger, run: RunToStart): void {
  let runs = abandonedRuns.get(deps);
  if (!runs) {
    runs = new AbandonedRuns({ prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, end: (r) => failUnqueuedRun(deps, r) });
    abandonedRuns.set(deps, runs);
  }
  runs.add({ runId: run.runId, query: run.query, log, release: run.unqueued });
}

/**
 * Ends a run the queue could not take as failed, only while it is queued (a worker may have
 * claimed it meanwhile: null then), and returns its terminal event. A queued run is ended
 * without reading its Redis log (see `finishRun`), and the end's publish is not waited for: the
 * run can be failed while Redis is down. PostgreSQL is retried for `retryForMs`.
 */
async function failUnqueuedRun(deps: GatewayDeps, run: Pick<RunToStart, "runId" | "query">, retryForMs = UNQUEUED_FAIL_RETRY_MS): Promise<RunEvent | null> {
  const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };
  return finishRun(store, { runId: run.runId, status: "failed", error: UNQUEUED, messages: [{ role: "user", content: run.query }], retryForMs, onlyIfQueued: true });
}
