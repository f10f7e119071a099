import type { Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { RequestHandler, Response } from "express";

/** How often a stopping server closes the connections that have fallen idle. */
const IDLE_CLOSE_INTERVAL_MS = 50;

/** How long the answers a stop gives at its cut (see `answerWaiting`) may take to be sent. */
const STOP_ANSWER_SEND_MS = 1000;

/**
 * A service's stop, as its requests see it. From `begin()` on, every answer says
 * `Connection: close`: the connection ends with it rather than being kept alive for a request
 * that the closing listener would cut (a pooled keep-alive client, busy enough that its
 * connection never falls idle, would otherwise go on sending on it until the grace runs out).
 *
 * A request is *waiting* until it passes `acting()`: it is being authenticated, counted or read,
 * and has changed nothing. At the cut, the stop answers the waiting ones itself (`answerWaiting`)
 * rather than cutting them without an answer; one that acts (starts a run, writes) is never
 * answered in its handler's place, as the stop cannot tell what it did.
 */
export class ServerStop {
  private stopping = false;
  /** Answers not yet finished, whose headers may not be sent yet. */
  private readonly open = new Set<Response>();
  /** Answers whose requests have passed `acting()`. */
  private readonly actingAnswers = new WeakSet<Response>();
  /** Answers the stop gave itself; their requests go no further. */
  private readonly answered = new WeakSet<Response>();
  /** What an answer of the stop needs besides the 503 (see `beforeAnswer`). */
  private readonly preparations = new WeakMap<Response, () => void>();

  /** Marks the service as stopping: answers not yet begun will close their connections. */
  begin(): void {
    this.stopping = true;
    for (const res of this.open) if (!res.headersSent) res.setHeader("Connection", "close");
  }

  isStopping(): boolean {
    return this.stopping;
  }

  /** Sets `Connection: close` on every answer not yet begun once the service is stopping. */
  closeConnections(): RequestHandler {
    return (_req, res, next) => {
      if (this.stopping) res.setHeader("Connection", "close");
      this.open.add(res);
      res.once("close", () => this.open.delete(res));
      next();
    };
  }

  /**
   * Mounted where a request's handling begins to change things: from here the stop no longer
   * answers it in its handler's place. A request the stop has answered already goes no further.
   */
  acting(): RequestHandler {
    return (_req, res, next) => {
      if (this.answered.has(res)) return;
      this.actingAnswers.add(res);
      next();
    };
  }

  /** Whether the stop answered `res` itself: whatever its request's middleware does next is moot. */
  answeredByStop(res: Response): boolean {
    return this.answered.has(res);
  }

  /** Has `prepare` run on `res` (adding headers: CORS, say) should the stop answer it. */
  beforeAnswer(res: Response, prepare: () => void): void {
    this.preparations.set(res, prepare);
  }

  /**
   * Answers every waiting request (see the class) 503 `unavailable`, in the contract's error
   * shape, and resolves once those answers are sent (their connections then close), or after a
   * second; returns how many were answered.
   */
  async answerWaiting(): Promise<number> {
    const sent: Promise<unknown>[] = [];
    for (const res of this.open) {
      if (res.headersSent || this.actingAnswers.has(res)) continue;
      this.answered.add(res);
      res.setHeader("Connection", "close");
      this.preparations.get(res)?.();
      sent.push(new Promise((resolve) => res.once("close", resolve)));
      res.status(503).json({ error: { code: "unavailable", message: "Shutting down: retry the request." } });
    }
    if (sent.length === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(sent), new Promise((resolve) => (timer = setTimeout(resolve, STOP_ANSWER_SEND_MS)))]);
    clearTimeout(timer);
    return sent.length;
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
