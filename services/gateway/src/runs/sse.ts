import type { Request, Response } from "express";
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";

/** Streams open in this process, so that shutdown can end them cleanly. */
const openStreams = new Set<SseStream>();

/** Ends every open stream (no terminal event: clients re-attach with Last-Event-ID). */
export function endAllStreams(): number {
  const n = openStreams.size;
  for (const s of [...openStreams]) s.end();
  return n;
}

export interface SseStream {
  send(event: RunEvent): void;
  end(): void;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/**
 * Starts a text/event-stream response. Call only after every check that can fail: from here on
 * the status is 200. Each event is framed `id: <seq>` + `data: <json>`; a `: ping` comment keeps
 * idle connections (and proxies) alive.
 */
export function openSse(req: Request, res: Response, heartbeatMs: number): SseStream {
  const controller = new AbortController();
  res.status(200);
  res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
  res.setHeader("Cache-Control", "no-cache, no-transform");
  res.setHeader("Connection", "keep-alive");
  res.setHeader("X-Accel-Buffering", "no");
  // The headers leave with the first event when there is one right away (a new run's
  // run_started: one write instead of two); otherwise at the end of this turn of the event loop.
  setImmediate(() => {
    if (!res.headersSent && !res.writableEnded) res.flushHeaders();
  });
  req.socket.setNoDelay(true);
  req.socket.setTimeout(0);

  const ping = setInterval(() => res.write(": ping\n\n"), heartbeatMs);
  ping.unref();
  const close = () => {
    clearInterval(ping);
    openStreams.delete(stream);
    controller.abort();
  };
  res.on("close", close);

  let corked = false;
  const uncork = () => {
    corked = false;
    res.uncork();
  };
  const stream: SseStream = {
    signal: controller.signal,
    send(event) {
      if (res.writableEnded) return;
      // Events that arrive together (one Redis message can carry a burst) leave in one write.
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(uncork);
      }
      res.write(`id: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`);
      // The response ends with its terminal event, in the same write.
      if (isTerminalEvent(event)) stream.end();
    },
    end() {
      clearInterval(ping);
      openStreams.delete(stream);
      if (!res.writableEnded) res.end();
    },
  };
  openStreams.add(stream);
  return stream;
}
