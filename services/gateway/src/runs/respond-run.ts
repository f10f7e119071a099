import type { Request, Response } from "express";
import { finalStatusOf, type RunEvent } from "@agentrun/contracts";
import { followRun, RunGoneError, type EarlyRunSubscription } from "@agentrun/events";
import { AppError, bearerRefusal, isUnavailableError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { onKeyRevoked } from "../auth/revocation-watch";
import { API_REALM } from "../middleware/auth.middleware";
import { recordRun } from "../middleware/request-id.middleware";
import { isStopping } from "../shutdown";
import { clearSseHeaders, openSse, type SseStream } from "./sse";
import { loadRunResult } from "./run-result";
import { freesItsKey } from "./idempotency";

/** Undefined for an error that means the database is unreachable; any other error is thrown on. */
const unlessUnavailable = (err: unknown): undefined => {
  if (isUnavailableError(err)) return undefined;
  throw err;
};

/** 404 for a run that its task's delete took while this request answered for it. */
const taskDeleted = (taskId: string, runId: string, final?: string) =>
  new AppError("task_not_found", { message: `Task '${taskId}' was deleted while its run '${runId}' was in progress${final ? `; the run was ${final}` : ""}.` });

/** JSON answers waiting for their run in this process, so that shutdown can answer them at once. */
const openWaits = new Set<AbortController>();

/**
 * Stops every JSON answer's wait: each answers 202 with its run's current status, as past the
 * wait limit (the run goes on; the caller polls it or follows its events elsewhere). A wait that
 * begins once the gateway is stopping (`beginStopping`: a run still being accepted) ends at once.
 */
export function endAllWaits(): number {
  const n = openWaits.size;
  for (const w of openWaits) w.abort();
  return n;
}

export interface RespondRunInput {
  runId: string;
  taskId: string;
  stream: boolean;
  /** Events the caller already holds and sends first (a new run's run_started). */
  sent?: RunEvent[];
  /** The caller created the run in this request (see `followRun`'s `fresh`). */
  fresh?: boolean;
  /** The stream, when the caller has opened it already (and sent `sent` on it). */
  sse?: SseStream;
  /** The run's channel, subscribed to before the run was queued (see `followRun`). */
  subscription?: EarlyRunSubscription;
  /** Fields added to the JSON answers (200 and 202), e.g. the widget's visitor token. */
  extra?: Record<string, unknown>;
}

/**
 * Answers for a run that exists: SSE from the first event not yet sent to its terminal event,
 * or (JSON) the Run with its tool calls once it ends — 202 with its current status past the
 * wait limit or when this gateway shuts down. Used for new runs, idempotent replays and the widget gateway.
 */
export async function respondWithRun(deps: GatewayDeps, req: Request, res: Response, input: RespondRunInput): Promise<void> {
  const { runId, taskId } = input;
  // A replay (the same Idempotency-Key again) names the run it answers with on its access line too.
  recordRun(res, input);
  const afterSeq = input.sent?.at(-1)?.seq ?? 0;
  // Each call's options written out rather than spread from shared fields: V8 keeps no
  // transitions from a spread's copy, so every run made new hidden classes.
  const follow = (onEvent: (event: RunEvent) => void, signal: AbortSignal, onReady?: () => void) =>
    followRun({ prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, hub: deps.hub, runId, afterSeq, fresh: input.fresh, subscription: input.subscription, onEvent, signal, onReady });
  if (input.stream) {
    // A replay (no stream opened by the caller): the status goes out once the follow has read
    // what the stores hold, so that a store failing that first read is answered 503 like any
    // outage (the request may be asked again with its key), not as an empty stream, and a run
    // found gone (its task deleted since the key was looked up) 404, as the JSON answer is.
    const replay = !input.sse;
    const sse = input.sse ?? openSse(req, res, deps.config.SSE_HEARTBEAT_MS, { deferHeaders: true });
    if (replay) for (const e of input.sent ?? []) sse.send(e);
    try {
      await follow(sse.send, sse.signal, replay ? sse.ready : undefined);
    } catch (err) {
      if (replay && !res.headersSent && !res.destroyed) {
        clearSseHeaders(res);
        throw err instanceof RunGoneError ? taskDeleted(taskId, runId) : err;
      }
      // The run goes on; the client can re-attach through the events endpoint.
      req.log.error({ err, runId }, "lost the run's event stream");
    }
    sse.end();
    return;
  }

  const wait = new AbortController();
  const timer = setTimeout(() => wait.abort(), deps.config.RUN_WAIT_TIMEOUT_MS);
  res.on("close", () => wait.abort());
  // Gone before this wait began: `close` has been emitted already.
  if (req.socket.destroyed || isStopping()) wait.abort();
  openWaits.add(wait);
  let revoked = false;
  const unwatch = onKeyRevoked(req, () => {
    revoked = true;
    wait.abort();
  });
  // Whether the run has emitted anything beyond `run_started` (it is running then).
  let started = afterSeq > 1;
  const accepted = (status: string) => res.status(202).json({ run_id: runId, task_id: taskId, status, ...input.extra });
  try {
    let terminal: RunEvent | null;
    try {
      terminal = await follow((e) => void (e.seq > 1 && (started = true)), wait.signal);
    } catch (err) {
      if (err instanceof RunGoneError) throw taskDeleted(taskId, runId);
      // A replay of an earlier request can be asked again (with its Idempotency-Key). A run this
      // request created was accepted: an error now (Redis or the database failing the first
      // read) must not invite a retry that would start and charge a second run.
      if (!input.sent) throw err;
      req.log.error({ err, runId }, "lost the run's events while waiting for it");
      terminal = null;
    }
    if (res.writableEnded || res.destroyed) return;
    // The run was accepted: the answer names it, so that the caller follows it with another key
    // rather than starting (and paying for) a second one.
    if (!terminal && revoked) {
      const refusal = { message: "The key this request was made with was revoked while it waited for its run, which goes on.", details: { run_id: runId, task_id: taskId } };
      // A widget key is no bearer credential: its 401 carries no challenge, as at its check.
      throw req.widget ? new AppError("unauthorized", refusal) : bearerRefusal(API_REALM, "invalid_token", refusal);
    }
    let final: string | undefined = terminal ? finalStatusOf(terminal) : undefined;
    if (!terminal) {
      // Past the wait limit (or shutting down): the run goes on; the caller polls the run or
      // follows its events. The run was accepted: a database that does not answer now makes this
      // no 503 (which invites a retry, and with it a second run), only a status taken from its events.
      const run = await deps.prisma.run.findUnique({ where: { id: runId }, select: { status: true } }).catch(unlessUnavailable);
      if (run === null) throw taskDeleted(taskId, runId);
      // One that has ended meanwhile (or before a shutdown's wait began) is answered with its result.
      if (!run || run.status === "queued" || run.status === "running") return void accepted(run?.status ?? (started ? "running" : "queued"));
      final = run.status;
    }
    const result = await loadRunResult(deps.prisma, runId).catch(unlessUnavailable);
    // Ended, but its result cannot be read right now: 202 with its final status, to be read later.
    if (result === undefined) accepted(final ?? "running");
    // Ended because its task was deleted, which took the run with it.
    else if (result === null) throw taskDeleted(taskId, runId, final ?? "stopped");
    // A replay (same Idempotency-Key) of a run that never executed for an outage: that does not
    // use up the key, and is answered as the first request was.
    else if (!input.sent && freesItsKey(result)) throw new AppError("unavailable", { message: result.error!.message, details: { run_id: runId, task_id: taskId } });
    else res.status(200).json({ ...result, ...input.extra });
  } finally {
    clearTimeout(timer);
    unwatch();
    openWaits.delete(wait);
  }
}
