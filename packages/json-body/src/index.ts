import express, { type Request, type RequestHandler } from "express";
import { isStorableText } from "@agentrun/db";
import { AppError } from "@agentrun/errors";

/**
 * Set by the parser when the raw body holds a `\u0000` escape or a surrogate's escape (`\ud800`
 * … `\udfff`, which may be lone); the walk confirms it.
 */
const mayHoldNul = Symbol("mayHoldNul");

/**
 * Parses JSON bodies after authentication (so an anonymous caller gets 401, not a parse error).
 * A request with a body that is not application/json is refused with 415. PostgreSQL stores no
 * U+0000 in text or JSON, nor a lone UTF-16 surrogate in JSON, so a request holding U+0000 in its
 * URL, or either anywhere in its body, is refused with 400 `invalid_request` (rather than failing
 * where it is stored).
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  const parse = express.json({
    limit: limitBytes,
    strict: true,
    type: () => true,
    verify: (req, _res, buf) => {
      if (buf.includes("\\u0000") || buf.includes("\\ud") || buf.includes("\\uD")) (req as Request & { [mayHoldNul]?: true })[mayHoldNul] = true;
    },
  });
  const checkType: RequestHandler = (req, _res, next) => {
    if (/%00/i.test(req.originalUrl)) throw unstorableRefused("The URL", "\0");
    const hasBody = req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
    if (!hasBody) return next();
    if (!req.is("application/json")) throw new AppError("unsupported_media_type");
    next();
  };
  const checkNul: RequestHandler = (req, _res, next) => {
    if ((req as Request & { [mayHoldNul]?: true })[mayHoldNul]) {
      const found = unstorablePath(req.body, []);
      if (found) throw unstorableRefused(found.path.length ? found.path.join(".") : "body", found.text, found.path.join("."));
    }
    next();
  };
  return [checkType, parse, checkNul];
}

/** 400 for `text` (a string or key at `where`) holding U+0000 or a lone surrogate. */
function unstorableRefused(where: string, text: string, path?: string): AppError {
  const what = text.includes("\0") ? "the NUL character (U+0000)" : "a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)";
  const message = `${where} must not contain ${what}.`;
  return new AppError("invalid_request", { message, details: path === undefined ? undefined : [{ path, message }] });
}

/** The first string or key holding U+0000 or a lone surrogate, with its path; or null. */
function unstorablePath(value: unknown, at: (string | number)[]): { path: (string | number)[]; text: string } | null {
  if (typeof value === "string") return isStorableText(value) ? null : { path: at, text: value };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = unstorablePath(value[i], [...at, i]);
      if (p) return p;
    }
    return null;
  }
  if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (!isStorableText(k)) return { path: [...at, k], text: k };
      const p = unstorablePath(v, [...at, k]);
      if (p) return p;
    }
  }
  return null;
}
