import type { RequestHandler, Response } from "express";
import { ServerStop } from "@agentrun/express-server";

/**
 * The gateway's stop, as requests see it. From SIGTERM on, every answer says `Connection: close`
 * (the connection ends with it, rather than being kept for a request that the closing listener
 * would cut), `/readyz` answers 503, a stream or a `stream: false` wait that begins ends at once
 * (see `endAllStreams`, `endAllWaits`, which end those already open), and the requests that are
 * starting a run are awaited before the connections are cut and the queue closed: a run is
 * accepted whole (recorded and queued, its caller answered) or not at all. At the cut, requests
 * that have not begun to act (still authenticating, say, on a database that does not answer) are
 * answered 503 `unavailable`, so their callers know to retry, rather than cut without an answer.
 */
const stop = new ServerStop();
const runStarts = new Set<Promise<unknown>>();

/** Marks the gateway as stopping (see above). */
export function beginStopping(): void {
  stop.begin();
}

export function isStopping(): boolean {
  return stop.isStopping();
}

/** Sets `Connection: close` on every answer not yet begun once the gateway is stopping. */
export function closeConnectionsWhenStopping(): RequestHandler {
  return stop.closeConnections();
}

/**
 * Mounted where the API's and the widget's routes begin (after authentication, rate limits and
 * the body): past it a request may start a run or change things, and is never answered by the stop
 * in its handler's place; one the stop has answered goes no further.
 */
export function actingFromHere(): RequestHandler {
  return stop.acting();
}

/** Whether the stop answered `res` itself (the request's later errors are then moot). */
export function answeredByStop(res: Response): boolean {
  return stop.answeredByStop(res);
}

/**
 * Has `prepare` run on `res` should the stop answer it: a widget request whose key is being
 * looked up gets CORS headers for its origin, as an outage's answer does, so that the page can
 * read the 503.
 */
export function beforeStopAnswer(res: Response, prepare: () => void): void {
  stop.beforeAnswer(res, prepare);
}

/** Answers 503 `unavailable` every request that has not begun to act (see above); returns how many. */
export function answerWaitingRequests(): Promise<number> {
  return stop.answerWaiting();
}

/** Counts `start` among the run starts the stop waits for, until it settles; returns it. */
export function trackRunStart<T>(start: Promise<T>): Promise<T> {
  const forget = (): void => void runStarts.delete(settled);
  const settled: Promise<void> = start.then(forget, forget);
  runStarts.add(settled);
  return start;
}

/** Resolves once no run start is in progress, or after `timeoutMs`; false when some were still going. */
export async function runStartsSettled(timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (runStarts.size > 0) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(runStarts), new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
    clearTimeout(timer);
  }
  return true;
}
