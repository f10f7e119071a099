import { randomUUID } from "node:crypto";
import type { RequestHandler } from "express";
import type { Logger } from "@agentrun/logger";
import { clientRequestId } from "@agentrun/express-server";
import { setRequestContext } from "../request-context";

/**
 * Accepts `X-Request-Id` (or generates one), echoes it on the response, gives the request a
 * child logger carrying it and logs each finished request in one line, as the gateway does: the
 * gateway sends its own request id, a worker the id of the run it calls for.
 */
export function requestId(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const id = clientRequestId(req.get("x-request-id")) ?? randomUUID();
    const log = logger.child({ requestId: id });
    setRequestContext(res, id, log);
    res.setHeader("X-Request-Id", id);
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      log.info({ method: req.method, path: req.originalUrl.split("?")[0], status: res.statusCode, ms: Math.round(ms * 10) / 10 }, "request");
    });
    next();
  };
}
