import type { Response } from "express";
import type { Logger } from "@agentrun/logger";

/**
 * Per-request state kept in `res.locals` rather than by augmenting Express's global `Request`
 * type, which every service in the monorepo shares in one type-check.
 */
interface RequestLocals {
  requestId?: string;
  log?: Logger;
}

/** Stores the request id and its child logger; called once by the request-id middleware. */
export function setRequestContext(res: Response, requestId: string, log: Logger): void {
  const locals = res.locals as RequestLocals;
  locals.requestId = requestId;
  locals.log = log;
}

/** The request's child logger (carries `requestId`), or `fallback` before the middleware ran. */
export function requestLog(res: Response, fallback: Logger): Logger {
  return (res.locals as RequestLocals).log ?? fallback;
}
