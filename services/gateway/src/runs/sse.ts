import type { Request, Response } from "express";
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";
import { onKeyRevoked } from "../auth/revocation-watch";
import { isStopping } from "../shutdown";
import { STALLED_CLIENT_TIMEOUT_MS, stallTimer } from "./stalled-client";

/**
 * See STALLED_CLIENT_TIMEOUT_MS: a stream's client that takes nothing for this long is
 * disconnected, which releases the stream as if it had gone away; it re-attaches with
 * Last-Event-ID and loses nothing.
 */
export { STALLED_CLIENT_TIMEOUT_MS };

export interface SseOptions {
  /** See {@link STALLED_CLIENT_TIMEOUT_MS}. @defaultValue STALLED_CLIENT_TIMEOUT_MS */
  stalledClientTimeoutMs?: number;
  /**
   * Send the status and headers only with the first event or at {@link SseStream.ready}, so that
   * the caller can still answer with an error status until then.
   */
  deferHeaders?: boolean;
}

/**
 * The reason a stream's signal aborts with once its response has closed. A reason of its own
 * spares each stream the `DOMException` (and its stack trace) that `abort()` makes without one.
 */
const STREAM_CLOSED = new Error("the event stream's response closed");

/** Streams open in this process, so that shutdown can end them cleanly. */
const openStreams = new Set<SseStream>();

/**
 * Ends every open stream (no terminal event: clients re-attach with Last-Event-ID). A stream
 * opened once the gateway is stopping (`beginStopping`: a run still being accepted) ends as soon
 * as the events its opener sends in the same turn (a new run's run_started) are written.
 */
export function endAllStreams(): number {
  const n = openStreams.size;
  for (const s of [...openStreams]) s.end();
  return n;
}

export interface SseStream {
  send(event: RunEvent): void;
  /** Sends the status and headers now, if no event has (see {@link SseOptions.deferHeaders}). */
  ready(): void;
  /** Ends the response once the events already sent have been written. */
  end(): void;
  /** Aborted when the client goes away, or is disconnected for not reading. */
  signal: AbortSignal;
}

/**
 * The header that tells a client how often the stream's `: ping` comes, so that it can tell a
 * quiet stream from one a proxy or a dead connection holds open without data.
 */
export const HEARTBEAT_HEADER = "X-Heartbeat-Interval-Ms";

/**
 * An event stream's headers besides {@link HEARTBEAT_HEADER}. No Connection header of its own:
 * Node keeps the connection alive after the stream, or closes it when the client asked for that
 * (Connection: close, HTTP/1.0).
 */
const SSE_HEADERS: readonly (readonly [string, string])[] = [
  ["Content-Type", "text/event-stream; charset=utf-8"],
  ["Cache-Control", "no-cache, no-transform"],
  ["X-Accel-Buffering", "no"],
];

/** The status and headers of an event stream: what {@link openSse} sends, and what HEAD answers. */
export function setSseHeaders(res: Response, heartbeatMs: number): void {
  res.status(200);
  res.setHeader(HEARTBEAT_HEADER, String(heartbeatMs));
  for (const [name, value] of SSE_HEADERS) res.setHeader(name, value);
}

/** Takes back what {@link setSseHeaders} set, for a stream that answers an error instead. */
export function clearSseHeaders(res: Response): void {
  res.removeHeader(HEARTBEAT_HEADER);
  for (const [name] of SSE_HEADERS) res.removeHeader(name);
}

/**
 * Starts a text/event-stream response. Call only after every check that can fail: from here on
 * the status is 200. Each event is framed `id: <seq>` + `data: <json>`; a `: ping` comment keeps
 * idle connections (and proxies) alive.
 *
 * Writes follow the client's pace: once the response is full, further events wait (as the event
 * objects the caller already holds, not as a second, serialized copy) until it drains, so a long
 * replay never sits whole in the response's buffer. A client that stops reading is disconnected
 * after `stalledClientTimeoutMs`.
 */
export function openSse(req: Request, res: Response, heartbeatMs: number, options: SseOptions = {}): SseStream {
  const stalledClientTimeoutMs = options.stalledClientTimeoutMs ?? STALLED_CLIENT_TIMEOUT_MS;
  const controller = new AbortController();
  setSseHeaders(res, heartbeatMs);
  // The headers leave with the first event when there is one right away (a new run's
  // run_started: one write instead of two); otherwise at the end of this turn of the event loop.
  const ready = () => {
    if (!res.headersSent && !gone()) res.flushHeaders();
  };
  if (!options.deferHeaders) setImmediate(ready);
  req.socket.setNoDelay(true);
  // No idle timeout (a stream may rightly be quiet between pings): a client that stops reading
  // is caught by the stall timer below instead.
  req.socket.setTimeout(0);

  const gone = () => res.writableEnded || res.destroyed;
  /** Events sent while the response is full, in order. */
  const waiting: RunEvent[] = [];
  /** A write returned false and `drain` has not come yet. */
  let full = false;
  let ending = false;

  const stalled = stallTimer(req, res, stalledClientTimeoutMs, "disconnected an event-stream client that took nothing in time");
  const stall = stalled.arm;
  const unstall = stalled.disarm;

  let corked = false;
  const uncork = () => {
    corked = false;
    res.uncork();
  };
  const write = (chunk: string) => {
    // Writes of one turn of the event loop (one Redis message can carry a burst) leave together.
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
    if (!res.write(chunk)) {
      full = true;
      stall();
    }
  };
  const finish = () => {
    if (gone()) return;
    res.end();
    // The socket outlives the response (keep-alive) and has no idle timeout: a client that never
    // takes the end of the stream must not keep it buffered. `finish` disarms this.
    stall();
  };
  const writeEvent = (event: RunEvent) => {
    write(`id: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`);
    // The response ends with its terminal event, in the same write; nothing follows it.
    if (isTerminalEvent(event)) {
      waiting.length = 0;
      stream.end();
    }
  };
  const pump = () => {
    let i = 0;
    while (!full && !gone() && i < waiting.length) writeEvent(waiting[i++]!);
    waiting.splice(0, i);
    if (ending && waiting.length === 0) finish();
  };
  res.on("drain", () => {
    full = false;
    unstall();
    pump();
  });
  res.on("finish", unstall);

  // Not before deferred headers are sent: a ping would send them, and a 200, while the caller
  // may still answer 503 for a first read of the stores that fails.
  const ping = setInterval(() => {
    if (!full && (res.headersSent || !options.deferHeaders)) write(": ping\n\n");
  }, heartbeatMs);
  ping.unref();
  // A key revoked meanwhile ends the stream as shutdown does: the client's re-attach gets the 401.
  const unwatch = onKeyRevoked(req, () => {
    req.log?.info("ended an event stream whose key was revoked");
    stream.end();
  });
  const close = () => {
    clearInterval(ping);
    unwatch();
    unstall();
    waiting.length = 0;
    openStreams.delete(stream);
    controller.abort(STREAM_CLOSED);
  };
  res.on("close", close);
  // A client gone before this stream began (while the run was being created or looked up):
  // `close` has been emitted already, so release at once what the caller would follow with.
  if (req.socket.destroyed) queueMicrotask(close);

  const stream: SseStream = {
    signal: controller.signal,
    ready,
    send(event) {
      if (gone() || ending) return;
      if (full || waiting.length > 0) waiting.push(event);
      else writeEvent(event);
    },
    end() {
      clearInterval(ping);
      unwatch();
      openStreams.delete(stream);
      ending = true;
      if (waiting.length === 0) finish();
    },
  };
  openStreams.add(stream);
  if (isStopping()) setImmediate(() => stream.end());
  return stream;
}
