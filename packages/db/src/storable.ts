/**
 * What PostgreSQL stores in place of U+0000 and of a lone UTF-16 surrogate (`"\ud800"` from a
 * JSON escape), which text and jsonb columns cannot hold.
 */
export const NUL_REPLACEMENT = "\uFFFD";

/** `s` with every U+0000 and lone surrogate replaced by U+FFFD, so that PostgreSQL can store it. */
export function storableText(s: string): string {
  const text = s.includes("\0") ? s.replaceAll("\0", NUL_REPLACEMENT) : s;
  return text.isWellFormed() ? text : text.toWellFormed();
}

/** Whether PostgreSQL can store `s` as it is: no U+0000 and no lone surrogate. */
export function isStorableText(s: string): boolean {
  return !s.includes("\0") && s.isWellFormed();
}

/**
 * A JSON value with U+0000 and lone surrogates replaced by U+FFFD in every string and key, for values that come from
 * outside (a model's output, a fetched page) and end up in text or jsonb columns. Returns `value`
 * itself when it holds none.
 */
export function storableJson<T>(value: T): T {
  if (typeof value === "string") return storableText(value) as T;
  if (Array.isArray(value)) {
    const items = value.map(storableJson);
    return (items.some((v, i) => v !== value[i]) ? items : value) as T;
  }
  if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    let changed = false;
    const entries = Object.entries(value).map(([k, v]) => {
      const kk = storableText(k);
      const vv = storableJson(v);
      if (kk !== k || vv !== v) changed = true;
      return [kk, vv];
    });
    return (changed ? Object.fromEntries(entries) : value) as T;
  }
  return value;
}

/** Escapes in JSON text that may stand for U+0000 or a lone surrogate (JSON.stringify escapes both). */
const MAY_BE_UNSTORABLE = /\\u0000|\\ud[89a-f]/i;

/**
 * `JSON.stringify(value)` as PostgreSQL can store it in jsonb. The text is only scanned: the
 * value is cleaned with {@link storableJson} and serialized again when an escape in it may stand
 * for U+0000 or a lone surrogate, which is rare, so values on the hot path are not walked.
 */
export function storableJsonText(value: unknown): string {
  const text = JSON.stringify(value);
  return MAY_BE_UNSTORABLE.test(text) ? JSON.stringify(storableJson(value)) : text;
}

/**
 * Whether the JSON text in `buf` nests arrays and objects more than `max` levels deep (a scan, no
 * parse: a far deeper value would overflow the stack of every recursive step after the parser).
 */
export function nestsDeeperThan(buf: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next byte is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}
