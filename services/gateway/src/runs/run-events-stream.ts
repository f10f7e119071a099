import type { Request, Response } from "express";
import { eventsQuerySchema, isTerminalEvent, lastEventIdSchema, MAX_EVENT_SEQ, type RunEvent } from "@agentrun/contracts";
import { AppError, fieldRefused } from "@agentrun/errors";
import { followRun, readFoundRunEvents, RunGoneError, withoutGaps, type SubscriberHub } from "@agentrun/events";
import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { clearSseHeaders, openSse, setSseHeaders } from "./sse";

/**
 * Where a replay resumes: after the seq in `Last-Event-ID`, else after `?after`, else from the
 * start. Parameters are checked before the task and run are looked up (the contract's order:
 * parameters, then resources), so a malformed cursor is 400 whatever the ids are.
 */
export function resumeAfter(req: Request): number {
  const header = req.get("last-event-id");
  const parsed = header === undefined ? undefined : lastEventIdSchema.safeParse(header.trim());
  if (parsed && !parsed.success) throw fieldRefused("Last-Event-ID", `Last-Event-ID must be an integer from 0 to ${MAX_EVENT_SEQ} (an event's seq).`);
  // The query is checked also when the header wins: a parameter the endpoint does not read is refused.
  const { after } = eventsQuerySchema.parse(req.query);
  return parsed?.data ?? after;
}

/**
 * Where a replay of `run` starts reading for a client that has the events up to `afterSeq`. A
 * cursor past a finished run's end holds events the store lost (the run's worker died with them,
 * and Redis with its log): that client has not seen how the run ended, so it is answered from
 * the terminal event on.
 */
export function replayFrom(run: { status: string; lastSeq: number }, afterSeq: number): number {
  return hasEnded(run) && afterSeq > run.lastSeq ? run.lastSeq - 1 : afterSeq;
}

/** Whether `run` has ended: its `lastSeq` is then its terminal event's. */
function hasEnded(run: { status: string }): boolean {
  return run.status !== "queued" && run.status !== "running";
}

export interface RunEventsStreamInput {
  store: { prisma: PrismaClient; redis: Redis; redisPrefix: string; hub: SubscriberHub };
  run: { id: string; taskId: string; status: string; lastSeq: number };
  afterSeq: number;
  heartbeatMs: number;
}

/**
 * `err`, but for a RunGoneError: 404 task_not_found then, as a request after the delete gets, for
 * a run whose task was deleted after the run was looked up.
 */
function answerFor(err: unknown, run: { id: string; taskId: string }): unknown {
  if (!(err instanceof RunGoneError)) return err;
  return new AppError("task_not_found", { message: `Task '${run.taskId}' was deleted, with its run '${run.id}', while the run's events were being read.` });
}

/**
 * The stored events of `run`, looked up first, after `from` (see readFoundRunEvents: a run whose
 * task was deleted since is 404 task_not_found). Of a finished run, none past its terminal event
 * (`lastSeq`): the run's log refuses a writer's events from its end on, but that fence expires
 * with the log, and a worker frozen longer than that (a paused VM) could append later.
 */
async function readRunEvents(store: RunEventsStreamInput["store"], run: RunEventsStreamInput["run"], from: number): Promise<RunEvent[]> {
  const events = await readFoundRunEvents(store, run.id, from).catch((err: unknown) => {
    throw answerFor(err, run);
  });
  return hasEnded(run) && events.at(-1) !== undefined && events.at(-1)!.seq > run.lastSeq ? events.filter((e) => e.seq <= run.lastSeq) : events;
}

/**
 * A run's stored events after `afterSeq`, as the events endpoint lists them in JSON: up to the
 * first one missing (see withoutGaps). A run whose task was deleted after it was looked up is 404
 * task_not_found, as its stream is, rather than a list that starts past seq 1 or is empty.
 */
export async function listRunEvents(store: RunEventsStreamInput["store"], run: RunEventsStreamInput["run"], afterSeq: number): Promise<RunEvent[]> {
  const from = replayFrom(run, afterSeq);
  return withoutGaps(await readRunEvents(store, run, from), from);
}

/**
 * Streams a run's events after `afterSeq` (SSE): a finished run is replayed from the store, a run
 * in progress is followed to its terminal event. A finished run whose terminal event is at
 * `afterSeq` (a client re-attaching after it, as EventSource does whenever a stream ends) answers
 * 204, which tells EventSource to stop reconnecting; past it, the stream is the terminal event
 * alone. HEAD answers what GET would, without waiting for any event. A run whose task is deleted
 * before anything was sent answers 404 task_not_found (the store's events are read as those of
 * a run looked up first: see readFoundRunEvents).
 */
export async function streamRunEvents(req: Request, res: Response, input: RunEventsStreamInput): Promise<void> {
  const { store, run, afterSeq } = input;
  // Past a finished run's end, the terminal event (see replayFrom); EventSource then resumes
  // after it and gets 204. The read tells a run deleted since its look-up from one with nothing
  // left to send (see readFoundRunEvents).
  const stored = hasEnded(run) ? await readRunEvents(store, run, replayFrom(run, afterSeq)) : null;
  if (stored?.length === 0) {
    res.status(204).end();
    return;
  }
  // HEAD gets the stream's status and headers, and ends there: following the run would hold the
  // response (and any request pipelined after it) open until the run ends, for nothing.
  if (req.method === "HEAD") {
    setSseHeaders(res, input.heartbeatMs);
    res.end();
    return;
  }
  // A run in progress: the status goes out once the follow has read what the stores hold, so
  // that a store failing that first read is answered 503 like any outage, not as an empty stream.
  const sse = openSse(req, res, input.heartbeatMs, { deferHeaders: !stored });
  try {
    if (stored && isTerminalEvent(stored.at(-1)!)) for (const e of stored) sse.send(e);
    else await followRun({ prisma: store.prisma, redis: store.redis, redisPrefix: store.redisPrefix, hub: store.hub, runId: run.id, afterSeq, onEvent: sse.send, signal: sse.signal, onReady: sse.ready });
  } catch (err) {
    if (!res.headersSent && !res.destroyed) {
      // Nothing was sent: the error handler answers, with the response's other headers (request
      // id, rate limit, CORS); the stream is released when it has.
      clearSseHeaders(res);
      throw answerFor(err, run);
    }
    req.log.error({ err, runId: run.id }, "lost the run's event stream");
  }
  sse.end();
}
