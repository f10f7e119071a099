import type { RequestHandler } from "express";
import { AppError } from "@agentrun/errors";

/**
 * Refuses requests that did not arrive over TLS with 403 `https_required`, before anything reads
 * a key. `req.secure` is true for a direct TLS connection, or when a trusted proxy (TRUST_PROXY)
 * says `X-Forwarded-Proto: https`; from an untrusted peer that header is ignored. Mount it after
 * the health routes, which load balancers probe over plain HTTP.
 */
export function requireHttps(enabled: boolean): RequestHandler {
  return (req, _res, next) => {
    if (enabled && !req.secure) throw new AppError("https_required", { message: "This API is only served over HTTPS." });
    next();
  };
}
