import OpenAI from "openai";

/** The back-off before retry `n` (0-based) when the model names none: 0.5 s doubling up to 8 s, less up to a quarter. */
export function defaultBackoffMs(n: number, random = Math.random): number {
  return Math.min(500 * 2 ** n, 8000) * (1 - random() * 0.25);
}

/**
 * How long the model asked to be left alone before a retry, from `retry-after-ms` or
 * `retry-after` (seconds, or an HTTP date); null when it did not say.
 */
function askedWaitMs(headers: Headers | undefined, now = Date.now()): number | null {
  const ms = Number.parseFloat(headers?.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const after = headers?.get("retry-after");
  if (!after) return null;
  const seconds = Number.parseFloat(after);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(after);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * The wait before retrying a model request that failed with `err` before its answer began, or
 * null when it is not to be retried: the openai SDK's rules (a connection error or timeout, 408,
 * 409, 429 and 5xx, unless the model's `x-should-retry` says otherwise), with the model's own
 * wait where it names one. The call retries itself (rather than the SDK) so that a wait longer
 * than the call may still take fails at once with the model's answer (`model_rate_limited` for a
 * 429) instead of ending in a timeout after it, and so that no idle timeout runs during a wait.
 */
export function retryWaitMs(err: unknown, retry: number): number | null {
  if (err instanceof OpenAI.APIUserAbortError) return null;
  if (err instanceof OpenAI.APIConnectionError) return defaultBackoffMs(retry);
  if (!(err instanceof OpenAI.APIError) || err.status === undefined) return null;
  const should = err.headers?.get("x-should-retry");
  if (should === "false") return null;
  if (should !== "true" && ![408, 409, 429].includes(err.status) && err.status < 500) return null;
  return askedWaitMs(err.headers) ?? defaultBackoffMs(retry);
}
