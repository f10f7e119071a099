import express, { type RequestHandler } from "express";
import { AppError } from "@agentrun/errors";

/**
 * Parses JSON bodies after authentication (so an anonymous caller gets 401, not a parse error).
 * A request with a body that is not application/json is refused with 415.
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  const parse = express.json({ limit: limitBytes, strict: true, type: () => true });
  const checkType: RequestHandler = (req, _res, next) => {
    const hasBody = req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
    if (!hasBody) return next();
    if (!req.is("application/json")) throw new AppError("unsupported_media_type");
    next();
  };
  return [checkType, parse];
}
