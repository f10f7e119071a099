import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import type { RequestHandler } from "express";
import { isStorableText, nestsDeeperThan } from "@agentrun/db";
import { AppError, fieldRefused } from "@agentrun/errors";
import { inexactNumber } from "./inexact-number";
import { headerSentTwice } from "./raw-headers";
import { readBody } from "./read-body";
import { foreignCharset, foreignCharsetRefused, parseUtf8Json } from "./utf8-json";

export { answeredBeforeBodyEnd, DRAIN_AFTER_ANSWER_MS } from "./read-body";
export { contentDecoder } from "./content-codings";
export { headerSentTwice } from "./raw-headers";

/** What the parser's look at the raw body found, for the checks after parsing. */
interface RawBodyFlags {
  /** It holds a `\u0000` escape or a surrogate's escape (`\ud800` … `\udfff`, which may be lone); the walk confirms it. */
  mayHoldNul?: true;
  /** It nests arrays and objects deeper than {@link MAX_JSON_DEPTH}. */
  tooDeep?: true;
  /** It is not valid UTF-8 (the parser would put U+FFFD in its place). */
  notUtf8?: true;
  /** It may hold the key `__proto__` (spelled out or escaped); the walk confirms it. */
  mayHoldProto?: true;
  /** Its first number that would not be kept as written (see {@link inexactNumber}). */
  inexactNumber?: string;
}
const rawBodyFlags = Symbol("rawBodyFlags");
type Flagged = { [rawBodyFlags]?: RawBodyFlags };

/**
 * How deeply a body may nest arrays and objects. What the API takes is at most a few levels deep;
 * a far deeper body would overflow the stack of every recursive step after the parser (validation,
 * serialisation, storage) and fail as a 500 instead of a 400.
 */
export const MAX_JSON_DEPTH = 32;


/**
 * Parses JSON bodies after authentication (so an anonymous caller gets 401, not a parse error).
 * A request with a body that is not application/json, or that declares a charset other than
 * UTF-8 (or US-ASCII, a subset), is refused with 415 before any of it is read. PostgreSQL stores no
 * U+0000 in text or JSON, nor a lone UTF-16 surrogate in JSON, so a request holding U+0000 in its
 * URL, or either anywhere in its body, is refused with 400 `invalid_request` (rather than failing
 * where it is stored). So is a body nested deeper than {@link MAX_JSON_DEPTH} levels, and one that
 * is not valid UTF-8 (rather than stored with U+FFFD where its bytes were).
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  // Read as bytes and parsed here as UTF-8, whatever charset the header names (checkType admits
  // only UTF-8's): the checks below read the same bytes the value is parsed from.
  const read = readBody(limitBytes, (req, buf) => {
    const flags: RawBodyFlags = ((req as Flagged)[rawBodyFlags] = {});
    if (buf.includes("\\u0000") || buf.includes("\\ud") || buf.includes("\\uD")) flags.mayHoldNul = true;
    if (nestsDeeperThan(buf, MAX_JSON_DEPTH)) flags.tooDeep = true;
    const inexact = inexactNumber(buf);
    if (inexact !== null) flags.inexactNumber = inexact;
    if (!isUtf8(buf)) flags.notUtf8 = true;
    if (buf.includes("proto") || buf.includes("\\u")) flags.mayHoldProto = true;
  });
  const checkType: RequestHandler = (req, res, next) => {
    if (/%00/i.test(req.originalUrl)) throw unstorableRefused("The URL", "\0");
    const nonEmpty = req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
    if (!nonEmpty) return next();
    // Node keeps the first of two Content-Type headers: which one counts would depend on their order.
    if (headerSentTwice(req.rawHeaders, "content-type")) throw new AppError("unsupported_media_type", { message: "Send the Content-Type header once: application/json." });
    if (!req.is("application/json")) throw new AppError("unsupported_media_type");
    const charset = foreignCharset(req.headers["content-type"]);
    if (charset !== null) throw foreignCharsetRefused(charset);
    // Refused from its declared length, before reading any of it; the connection closes after
    // the answer instead of reading and discarding the rest.
    if (declaresBodyOver(req, limitBytes)) {
      res.setHeader("Connection", "close");
      throw new AppError("payload_too_large", { message: `The request body is too large: at most ${limitBytes} bytes.` });
    }
    next();
  };
  const checkParsed: RequestHandler = (req, _res, next) => {
    // Set only when there was a body to parse.
    const flags = (req as Flagged)[rawBodyFlags];
    if (!flags) return next();
    if (flags.notUtf8) {
      throw new AppError("invalid_request", { message: "The body is not valid UTF-8; JSON must be." });
    }
    if (flags.tooDeep) {
      throw new AppError("invalid_request", { message: `The JSON body must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep.` });
    }
    if (flags.inexactNumber !== undefined) {
      const shown = flags.inexactNumber.length > 40 ? `${flags.inexactNumber.slice(0, 40)}…` : flags.inexactNumber;
      throw new AppError("invalid_request", {
        message: `The JSON body holds the number ${shown}, which would not be kept as written: integers must lie within ±9007199254740991 and other numbers within the range of a double; send such values as strings.`,
      });
    }
    // What the look at the raw bytes refused is refused before they are parsed.
    req.body = parseUtf8Json(req.body as Buffer);
    if (flags.mayHoldNul) {
      const found = unstorablePath(req.body, []);
      if (found) throw unstorableRefused(found.path.length ? found.path.join(".") : "body", found.text, found.path.join("."));
    }
    if (flags.mayHoldProto) {
      // JSON.parse keeps `__proto__` as a key of its own, but copying the object into another
      // (validation does) sets the copy's prototype instead: the entry would be lost unsaid.
      const at = protoKeyPath(req.body, []);
      if (at) {
        const path = at.join(".");
        const message = `The key __proto__ is not accepted${path ? ` (in ${path})` : ""}.`;
        throw fieldRefused([...at, "__proto__"].join("."), message);
      }
    }
    next();
  };
  return [checkType, read, checkParsed];
}

/** The path of the first object holding the key `__proto__`, or null. */
function protoKeyPath(value: unknown, at: (string | number)[]): (string | number)[] | null {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = protoKeyPath(value[i], [...at, i]);
      if (p) return p;
    }
  } else if (value && typeof value === "object") {
    if (Object.hasOwn(value, "__proto__")) return at;
    for (const [k, v] of Object.entries(value)) {
      const p = protoKeyPath(v, [...at, k]);
      if (p) return p;
    }
  }
  return null;
}

/** 400 for `text` (a string or key at `where`) holding U+0000 or a lone surrogate. */
function unstorableRefused(where: string, text: string, path?: string): AppError {
  const what = text.includes("\0") ? "the NUL character (U+0000)" : "a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)";
  const message = `${where} must not contain ${what}.`;
  return path === undefined ? new AppError("invalid_request", { message }) : fieldRefused(path, message);
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

/**
 * Whether the request's Content-Length declares more than `limitBytes`: such a body is refused
 * (413) before any of it is read, and a client waiting for 100 Continue is not invited to send it.
 */
export function declaresBodyOver(req: Pick<IncomingMessage, "headers">, limitBytes: number): boolean {
  return Number(req.headers["content-length"] ?? 0) > limitBytes;
}
