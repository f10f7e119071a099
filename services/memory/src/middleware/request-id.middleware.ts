import { randomUUID } from "node:crypto";
import type { RequestHandler } from "express";
import type { Logger } from "@agentrun/logger";
import { setRequestContext } from "../request-context";

/** Ids a caller may choose; anything else is replaced so logs stay parseable. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Accepts `X-Request-Id` (or generates one), echoes it on the response, gives the request a
 * child logger carrying it and logs each finished request in one line, as the gateway does: the
 * gateway sends its own request id, a worker the id of the run it calls for.
 */
export function requestId(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get("x-request-id");
    const id = incoming && CLIENT_REQUEST_ID.test(incoming) ? incoming : randomUUID();
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
