/** What PostgreSQL stores in place of U+0000, which text and jsonb columns cannot hold. */
export const NUL_REPLACEMENT = "\uFFFD";

/** `s` with every U+0000 replaced by U+FFFD, so that PostgreSQL can store it. */
export function storableText(s: string): string {
  return s.includes("\0") ? s.replaceAll("\0", NUL_REPLACEMENT) : s;
}

/**
 * A JSON value with U+0000 replaced by U+FFFD in every string and key, for values that come from
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
