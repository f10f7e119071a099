import { AppError } from "@agentrun/errors";

/**
 * Charsets whose bytes are read as they are, as UTF-8: its spellings, and US-ASCII (a subset).
 * Any other (UTF-16, UTF-7, Latin-1 …) is refused rather than decoded: every check of the body
 * reads its raw bytes as UTF-8, so a body decoded otherwise would pass them unchecked.
 */
const UTF8_CHARSETS = new Set(["utf-8", "utf8", "us-ascii"]);

/** The JSON whitespace before a body's first character (RFC 8259's `ws`). */
const LEADING_WS = /^[\x20\x09\x0a\x0d]*/;

/**
 * The first `charset` parameter of the Content-Type header `contentType` that is not read as
 * UTF-8 (lower-cased, unquoted), or null when there is none (no charset, or only UTF-8's).
 */
export function foreignCharset(contentType: string | undefined): string | null {
  if (!contentType) return null;
  for (const param of contentType.split(";").slice(1)) {
    const eq = param.indexOf("=");
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== "charset") continue;
    let value = param.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1).replace(/\\(.)/g, "$1");
    value = value.toLowerCase();
    if (!UTF8_CHARSETS.has(value)) return value;
  }
  return null;
}

/** 415 for a body declared in `charset`. */
export function foreignCharsetRefused(charset: string): AppError {
  const shown = charset.length > 40 ? `${charset.slice(0, 40)}…` : charset;
  return new AppError("unsupported_media_type", { message: `The body's charset ${JSON.stringify(shown)} is not accepted: JSON bodies must be UTF-8.` });
}

/**
 * The value of the JSON text in `buf`, read as UTF-8 (a leading byte order mark skipped). Only an
 * object or an array is accepted at the top; an empty body reads as `{}`. Anything else is 400
 * `invalid_request`.
 */
export function parseUtf8Json(buf: Buffer): unknown {
  if (buf.length === 0) return {};
  const bom = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf;
  const text = buf.toString("utf8", bom ? 3 : 0);
  const first = text[LEADING_WS.exec(text)![0].length];
  if (first === "{" || first === "[") {
    try {
      return JSON.parse(text);
    } catch {
      // the answer below
    }
  }
  throw new AppError("invalid_request", { message: "The request body is not a valid JSON object." });
}
