import type { RequestHandler } from "express";
import { ServerStop } from "@agentrun/express-server";

/**
 * The gateway's stop, as requests see it. From SIGTERM on, every answer says `Connection: close`
 * (the connection ends with it, rather than being kept for a request that the closing listener
 * would cut), `/readyz` answers 503, a stream or a `stream: false` wait that begins ends at once
 * (see `endAllStreams`, `endAllWaits`, which end those already open), and the requests that are
 * starting a run are awaited before the connections are cut and the queue closed: a run is
 * accepted whole (recorded and queued, its caller answered) or not at all.
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
