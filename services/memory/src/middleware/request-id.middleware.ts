import { randomUUID } from "node:crypto";
import type { RequestHandler } from "express";
import type { Logger } from "@agentrun/logger";
import { clientRequestId } from "@agentrun/express-server";
import { setRequestContext } from "../request-context";

/**
 * Accepts `X-Request-Id` (or generates one), echoes it on the response, gives the request a
 * child logger carrying it and logs each request in one line when it is answered or abandoned by
 * its caller, as the gateway does: the gateway sends its own request id, a worker the id of the
 * run it calls for.
 */
export function requestId(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const id = clientRequestId(req.get("x-request-id")) ?? randomUUID();
    const log = logger.child({ requestId: id });
    setRequestContext(res, id, log);
    res.setHeader("X-Request-Id", id);
    const started = process.hrtime.bigint();
    // On close rather than finish, so that a request its caller gave up on (its timeout) before
    // the answer is logged too, marked as such.
    res.once("close", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // An abandoned request has no status unless its answer had begun.
      const outcome = { ...(res.headersSent ? { status: res.statusCode } : {}), ...(res.writableFinished ? {} : { abandoned: true }) };
      log.info({ method: req.method, path: req.originalUrl.split("?")[0], ...outcome, ms: Math.round(ms * 10) / 10 }, "request");
    });
    next();
  };
}
