/**
 * What OpenAI-compatible providers do differently from OpenAI's own API, as far as a model call
 * must know: finish reasons of their own, a thinking model's reasoning beside its answer, and
 * servers that refuse `stream_options`.
 */
import OpenAI from "openai";
import { storableText } from "@agentrun/db";
import { CUT_FINISH_REASONS, type CutFinishReason } from "@agentrun/contracts";

/** `finish_reason` values that end an answer as a failure (Mistral's `error`, DeepSeek's `insufficient_system_resource`). */
export const FAILED_FINISH_REASONS: ReadonlySet<string> = new Set(["error", "insufficient_system_resource"]);

/**
 * Clients whose server refused `stream_options` (Mistral answers 422 to fields it does not know):
 * their calls go without it, and their usage is estimated when not reported.
 */
export const withoutStreamOptions = new WeakSet<OpenAI>();

/** A refusal naming `stream_options`: a server that does not take the field. */
export function refusesStreamOptions(err: unknown): boolean {
  return err instanceof OpenAI.APIError && (err.status === 400 || err.status === 422) && /stream_options/.test(err.message);
}

export const isCutFinishReason = (r: unknown): r is CutFinishReason => (CUT_FINISH_REASONS as readonly unknown[]).includes(r);

/** A delta's reasoning text, and the field it came in. */
export function reasoningOf(delta: unknown): { field: "reasoning_content" | "reasoning"; text: string } | null {
  if (!delta || typeof delta !== "object") return null;
  const d = delta as { reasoning_content?: unknown; reasoning?: unknown };
  if (typeof d.reasoning_content === "string" && d.reasoning_content) return { field: "reasoning_content", text: storableText(d.reasoning_content) };
  if (typeof d.reasoning === "string" && d.reasoning) return { field: "reasoning", text: storableText(d.reasoning) };
  return null;
}
