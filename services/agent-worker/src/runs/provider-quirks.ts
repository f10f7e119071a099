/**
 * What OpenAI-compatible providers do differently from OpenAI's own API, as far as a model call
 * must know: finish reasons of their own, a thinking model's reasoning beside its answer, and
 * servers that refuse `stream_options`.
 */
import OpenAI from "openai";
import { storableText } from "@agentrun/db";
import { isCutFinishReason, type CutFinishReason } from "@agentrun/contracts";

/**
 * `finish_reason` values that end an answer as a failure: Mistral's `error`, DeepSeek's
 * `insufficient_system_resource`, and the `abort` of vLLM and SGLang, whose engine stopped the
 * request (scaled down, restarted, or asked to) with the answer unfinished.
 */
export const FAILED_FINISH_REASONS: ReadonlySet<string> = new Set(["error", "insufficient_system_resource", "abort"]);

/**
 * The models, by client (one per base URL), whose server refused `stream_options` (Mistral answers
 * 422 to fields it does not know): this worker's calls to them go without it, and their usage is
 * estimated when not reported.
 */
const streamOptionsRefused = new WeakMap<OpenAI, Set<string>>();

export const sendsStreamOptions = (client: OpenAI, model: string): boolean => !streamOptionsRefused.get(client)?.has(model);

export function refuseStreamOptions(client: OpenAI, model: string): void {
  const models = streamOptionsRefused.get(client) ?? new Set<string>();
  models.add(model);
  streamOptionsRefused.set(client, models);
}

/**
 * A refusal of the `stream_options` field itself: a validation error located at it (pydantic's
 * `detail[].loc`, as Mistral and FastAPI servers answer), or a provider's own short message naming
 * it (Azure's "Unrecognized request argument supplied: stream_options"). A body that only echoes
 * the request (which holds the field) is not one.
 */
export function refusesStreamOptions(err: unknown): boolean {
  if (!(err instanceof OpenAI.APIError) || (err.status !== 400 && err.status !== 422)) return false;
  const message = (err.error as { message?: unknown } | undefined)?.message;
  if (typeof message !== "string") return false;
  let body: unknown;
  try {
    body = JSON.parse(message);
  } catch {
    return /stream_options/.test(message) && !message.includes("{");
  }
  // A body of another shape, given whole as the message (see model-fetch's withErrorObject).
  const b = body as { detail?: unknown; message?: { detail?: unknown } } | null;
  const detail = b?.detail ?? b?.message?.detail;
  return Array.isArray(detail) && detail.some((d) => Array.isArray(d?.loc) && d.loc.includes("stream_options"));
}

/** A `finish_reason` that ends an answer early, as the run reports it (Mistral's `model_length` is `length`). */
export function cutReasonOf(finish: unknown): CutFinishReason | undefined {
  if (finish === "model_length") return "length";
  return isCutFinishReason(finish) ? finish : undefined;
}

/**
 * A delta's `reasoning_content` (DeepSeek's thinking models, which refuse a turn's next call
 * without it). The `reasoning` field of others (Groq, OpenRouter, vLLM) is not kept: some of the
 * servers that send it refuse it back.
 */
export function reasoningOf(delta: unknown): string | null {
  if (!delta || typeof delta !== "object") return null;
  const r = (delta as { reasoning_content?: unknown }).reasoning_content;
  return typeof r === "string" && r ? storableText(r) : null;
}

/**
 * A delta's `refusal`: OpenAI's models stream a refusal to answer there instead of in `content`
 * (which is then null). It is the model's answer to the user, and taken as its text.
 */
export function refusalOf(delta: unknown): string {
  if (!delta || typeof delta !== "object") return "";
  const r = (delta as { refusal?: unknown }).refusal;
  return typeof r === "string" ? r : "";
}
