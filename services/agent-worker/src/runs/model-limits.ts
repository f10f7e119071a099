/** Bounds on what one model call may send, so that a model gone wrong fails its call instead of filling the worker's memory. */

/**
 * Most tokens one count of one call is taken as (a prompt or an answer of 40 million tokens,
 * beyond any model's window). With at most 50 calls per run, a run's token counts stay inside
 * PostgreSQL's `integer`, whatever a model endpoint reports.
 */
export const MAX_REPORTED_TOKENS = 40_000_000;

/**
 * Most tool calls one answer may request. Providers send a handful in parallel; an answer with
 * more is a model gone wrong, and each call would run a tool and cost a credit. The call stops
 * reading at the first one beyond this and fails with `model_bad_response`.
 */
export const MAX_TOOL_CALLS_PER_ANSWER = 64;

/**
 * Most characters one answer's tool call arguments may add up to (the tools take a URL, an
 * expression, a sentence), and its reasoning (`reasoning_content`, about a million tokens): a
 * model that streams either without end fails the call instead of filling the worker's memory.
 */
export const MAX_TOOL_ARGUMENTS_CHARS = 1024 * 1024;
export const MAX_REASONING_CHARS = 4 * 1024 * 1024;

/**
 * Longest name and id of one tool call (tool names are a few dozen characters, providers' call
 * ids about as long): a model that streams either without end fails the call with
 * `model_bad_response`, rather than filling the worker's memory and every later request's
 * conversation.
 */
export const MAX_TOOL_NAME_CHARS = 256;
export const MAX_TOOL_CALL_ID_CHARS = 512;

/**
 * Most characters of text one answer may have (about 4 million tokens, beyond any model's
 * output limit): a model that streams text without end fails the call with `model_bad_response`.
 */
export const MAX_ANSWER_CHARS = 16 * 1024 * 1024;

/**
 * How long the rest of a response is read once its answer has ended: after `[DONE]`, and after a
 * chunk with a `finish_reason` (which the usage chunk and `[DONE]` follow). Reading it to its end
 * lets the connection serve the next call; a model that holds the connection open past that is
 * cut off, and the answer stands.
 */
export const DRAIN_AFTER_DONE_MS = 250;
export const DRAIN_AFTER_FINISH_MS = 2000;

/**
 * A token count as the model reported it, or null when it is not a count (missing, null,
 * negative, not a finite number): such a count is estimated instead. A fraction is rounded up,
 * a count beyond {@link MAX_REPORTED_TOKENS} taken as that.
 */
export function reportedTokens(v: unknown): number | null {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) return null;
  return Math.min(Math.ceil(v), MAX_REPORTED_TOKENS);
}
