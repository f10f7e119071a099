import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { ModelToolCall } from "./tool-call-deltas";

/** Tokens a call consumed: as the model reported them, or estimated when it was stopped first. */
export interface ModelUsage {
  promptTokens: number;
  completionTokens: number;
}

/** The usual estimate of a text's tokens: one per four characters. */
const tokensOf = (chars: number) => Math.ceil(chars / 4);

/** What a call consumed, estimated when the model did not say: the request's messages and the answer so far. */
export function estimateUsage(messages: ChatCompletionMessageParam[], text: string, calls: Iterable<ModelToolCall>): ModelUsage {
  let promptChars = 0;
  for (const m of messages) {
    const content = m.content;
    if (typeof content === "string") promptChars += content.length;
    else for (const part of content ?? []) if (part.type === "text") promptChars += part.text.length;
    if (m.role === "assistant") for (const c of m.tool_calls ?? []) if (c.type === "function") promptChars += c.function.name.length + c.function.arguments.length;
  }
  let answerChars = text.length;
  for (const c of calls) answerChars += c.name.length + c.arguments.length;
  return { promptTokens: tokensOf(promptChars), completionTokens: tokensOf(answerChars) };
}
