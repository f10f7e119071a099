import express, { type Request, type RequestHandler } from "express";
import { AppError } from "@agentrun/errors";

/** Set by the parser when the raw body holds a `\u0000` escape (the walk confirms it). */
const mayHoldNul = Symbol("mayHoldNul");

/**
 * Parses JSON bodies after authentication (so an anonymous caller gets 401, not a parse error).
 * A request with a body that is not application/json is refused with 415. PostgreSQL stores no
 * U+0000 in text or JSON, so a request holding it in its URL or anywhere in its body is refused
 * with 400 `invalid_request` (rather than failing where it is stored).
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  const parse = express.json({
    limit: limitBytes,
    strict: true,
    type: () => true,
    verify: (req, _res, buf) => {
      if (buf.includes("\\u0000")) (req as Request & { [mayHoldNul]?: true })[mayHoldNul] = true;
    },
  });
  const checkType: RequestHandler = (req, _res, next) => {
    if (/%00/i.test(req.originalUrl)) throw nulRefused("The URL");
    const hasBody = req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
    if (!hasBody) return next();
    if (!req.is("application/json")) throw new AppError("unsupported_media_type");
    next();
  };
  const checkNul: RequestHandler = (req, _res, next) => {
    if ((req as Request & { [mayHoldNul]?: true })[mayHoldNul]) {
      const path = nulPath(req.body, []);
      if (path) throw nulRefused(path.length ? path.join(".") : "body", path.join("."));
    }
    next();
  };
  return [checkType, parse, checkNul];
}

function nulRefused(where: string, path?: string): AppError {
  const message = `${where} must not contain the NUL character (U+0000).`;
  return new AppError("invalid_request", { message, details: path === undefined ? undefined : [{ path, message }] });
}

/** The path of the first string or key holding U+0000, or null. */
function nulPath(value: unknown, at: (string | number)[]): (string | number)[] | null {
  if (typeof value === "string") return value.includes("\0") ? at : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = nulPath(value[i], [...at, i]);
      if (p) return p;
    }
    return null;
  }
  if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k.includes("\0")) return [...at, k];
      const p = nulPath(v, [...at, k]);
      if (p) return p;
    }
  }
  return null;
}
