import { randomUUID } from "node:crypto";
import type { RequestHandler, Response } from "express";
import type { Logger } from "@agentrun/logger";
import { clientRequestId } from "@agentrun/express-server";

declare module "express-serve-static-core" {
  interface Locals {
    /** The run this request started or answered with, for its access line (see {@link recordRun}). */
    runId?: string;
    taskId?: string;
  }
}

/** Names the run a request started or answers with on its access line. */
export function recordRun(res: Response, ids: { runId: string; taskId: string }): void {
  res.locals.runId = ids.runId;
  res.locals.taskId = ids.taskId;
}

/** A request id of the gateway's own making, for a request without a usable X-Request-Id. */
export const newRequestId = (): string => `req_${randomUUID().replaceAll("-", "")}`;

/** The logger `req.log` is made from, and `req.log` once made. */
const BASE_LOGGER = Symbol("agentrun.requestBaseLogger");
const REQUEST_LOGGER = Symbol("agentrun.requestLogger");
interface LazyLog {
  id: string;
  [BASE_LOGGER]: Logger;
  [REQUEST_LOGGER]?: Logger;
}

/**
 * Makes `req.log` on the requests' prototype: the child logger carrying the request id is made on
 * first use. Most requests log nothing at the usual levels, and a pino child (its bindings and
 * redaction set up) was a twentieth of a small request's CPU in the gateway.
 */
function installLazyLog(proto: object): void {
  if (Object.prototype.hasOwnProperty.call(proto, REQUEST_LOGGER)) return;
  Object.defineProperty(proto, REQUEST_LOGGER, { value: undefined, writable: true });
  Object.defineProperty(proto, "log", {
    configurable: true,
    get(this: LazyLog): Logger {
      return (this[REQUEST_LOGGER] ??= this[BASE_LOGGER].child({ requestId: this.id }));
    },
    set(this: LazyLog, log: Logger) {
      this[REQUEST_LOGGER] = log;
    },
  });
}

/**
 * Echoes the client's X-Request-Id (or makes one), gives the request a child logger carrying it
 * (`req.log`, made when first used), and logs one line per request when the response ends (or the
 * client goes away) if the logger's level takes info lines: with the run it started or answered
 * with (see {@link recordRun}), and `abandoned: true` for an answer the client did not wait for.
 */
export function requestId(logger: Logger): RequestHandler {
  return (req, res, next) => {
    req.id = clientRequestId(req.get("x-request-id")) ?? newRequestId();
    res.setHeader("X-Request-Id", req.id);
    installLazyLog(Object.getPrototypeOf(req) as object);
    (req as unknown as LazyLog)[BASE_LOGGER] = logger;
    if (logger.isLevelEnabled("info")) {
      const start = process.hrtime.bigint();
      res.once("close", () => {
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        // originalUrl: a router mounted at /api or /api/v1 rewrites req.url (and so req.path) for its routes.
        const path = req.originalUrl.split("?")[0];
        // An answer cut short (the client gone, a stream dropped) is not a plain success, and one
        // never begun has no status: res.statusCode would claim the 200 it was born with.
        const outcome = { ...(res.headersSent ? { status: res.statusCode } : {}), ...(res.writableFinished ? {} : { abandoned: true }) };
        const { runId, taskId } = res.locals;
        req.log.info({ method: req.method, path, ...outcome, ms: Math.round(ms * 10) / 10, orgId: req.auth?.orgId, runId, taskId }, "request");
      });
    }
    next();
  };
}
