/** The OpenAI response objects: the `chat.completion` body and the `chat.completion.chunk`s. */
import { chunkPieces } from "./directives";
import type { Answer, Plan, Usage } from "./script";

/** What every object of one response shares. */
export interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

/** The non-streaming `chat.completion` object for `plan`. */
export function completionObject(meta: CompletionMeta, plan: Plan): Record<string, unknown> {
  const { answer } = plan;
  const message =
    answer.kind === "text"
      ? { role: "assistant", content: answer.text, refusal: null }
      : {
          role: "assistant",
          content: answer.text ?? null,
          refusal: null,
          tool_calls: answer.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
        };
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(plan) }],
    usage: plan.directives.noUsage ? undefined : plan.usage,
  };
}

export function finishReason({ answer, directives }: Plan): "stop" | "tool_calls" | "length" | "content_filter" {
  return directives.finish ?? (answer.kind === "text" ? "stop" : "tool_calls");
}

/**
 * The deltas that carry the answer, one per stream chunk, each made as it is asked for. Text: the
 * answer split into `chunks` pieces, the first also carrying the role. Tool calls: per call, its
 * arguments split into `chunks` pieces; the first delta of a call carries its id, type and name,
 * as OpenAI streams them. Tool calls with a preface text stream that text first, as text deltas.
 */
export function* answerDeltas(answer: Answer, chunks: number): Generator<Record<string, unknown>> {
  function* textDeltas(text: string) {
    let first = true;
    for (const content of chunkPieces(text, chunks)) {
      yield first ? { role: "assistant", content } : { content };
      first = false;
    }
  }
  if (answer.kind === "text") return yield* textDeltas(answer.text);
  if (answer.text) yield* textDeltas(answer.text);
  for (const [index, call] of answer.calls.entries()) {
    let first = true;
    for (const args of chunkPieces(call.arguments, chunks)) {
      if (!first) {
        yield { tool_calls: [{ index, function: { arguments: args } }] };
        continue;
      }
      first = false;
      const head = { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: args } }] };
      yield index === 0 && !answer.text ? { role: "assistant", content: null, ...head } : head;
    }
  }
}

/** Wraps a delta (or, with `choices: []`, the usage) into a `chat.completion.chunk`. */
export function chunkObject(
  meta: CompletionMeta,
  choice: { delta: Record<string, unknown>; finish_reason: string | null } | null,
  includeUsage: boolean,
  usage: Usage | null = null,
): Record<string, unknown> {
  const chunk: Record<string, unknown> = {
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices: choice ? [{ index: 0, delta: choice.delta, logprobs: null, finish_reason: choice.finish_reason }] : [],
  };
  // OpenAI puts `usage: null` on every chunk but the last once usage was asked for.
  if (includeUsage) chunk.usage = usage;
  return chunk;
}
