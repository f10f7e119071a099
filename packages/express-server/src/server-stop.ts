import type { Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { RequestHandler, Response } from "express";

/** How often a stopping server closes the connections that have fallen idle. */
const IDLE_CLOSE_INTERVAL_MS = 50;

/**
 * A service's stop, as its requests see it. From `begin()` on, every answer says
 * `Connection: close`: the connection ends with it rather than being kept alive for a request
 * that the closing listener would cut (a pooled keep-alive client, busy enough that its
 * connection never falls idle, would otherwise go on sending on it until the grace runs out).
 */
export class ServerStop {
  private stopping = false;
  /** Answers being worked on, whose headers may not be sent yet. */
  private readonly answering = new Set<Response>();

  /** Marks the service as stopping: answers not yet begun will close their connections. */
  begin(): void {
    this.stopping = true;
    for (const res of this.answering) if (!res.headersSent) res.setHeader("Connection", "close");
  }

  isStopping(): boolean {
    return this.stopping;
  }

  /** Sets `Connection: close` on every answer not yet begun once the service is stopping. */
  closeConnections(): RequestHandler {
    return (_req, res, next) => {
      if (this.stopping) res.setHeader("Connection", "close");
      else {
        this.answering.add(res);
        res.once("close", () => this.answering.delete(res));
      }
      next();
    };
  }
}

export interface DrainOptions {
  /** How long the requests being handled may take before their connections are cut. */
  graceMs: number;
  /** Awaited after the grace, before the connections still open are cut. */
  beforeCut?: () => Promise<void>;
}

/**
 * Stops `server` taking connections and closes each one as it falls idle (an answer sent, a
 * stream ended); after `graceMs` (and `beforeCut`), cuts whatever is still open. Resolves once
 * every connection is closed.
 */
export async function drainServer(server: Pick<Server, "close" | "closeIdleConnections" | "closeAllConnections">, { graceMs, beforeCut }: DrainOptions): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const idle = setInterval(() => server.closeIdleConnections(), IDLE_CLOSE_INTERVAL_MS);
  try {
    const grace = new AbortController();
    await Promise.race([closed, sleep(graceMs, undefined, { signal: grace.signal }).catch(() => {})]);
    grace.abort();
    await beforeCut?.();
    server.closeAllConnections();
    await closed;
  } finally {
    clearInterval(idle);
  }
}
