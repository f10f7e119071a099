/**
 * Decides what the scripted model answers to one request: reads the directives of the last user
 * message and turns them into an {@link Plan} that the route then delivers (streamed or not).
 */
import { charCount, estimateTokens, parseDirectives, type Directives } from "./directives";
import { contentText, type ChatCompletionRequest, type ChatMessage } from "./request";

/** One tool call the model asks for. */
export interface PlannedToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** A text answer, or tool calls (with `[preface]`, preceded by text in the same answer). */
export type Answer = { kind: "text"; text: string } | { kind: "tool_calls"; calls: PlannedToolCall[]; text?: string };

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface Plan {
  directives: Directives;
  answer: Answer;
  usage: Usage;
}

/**
 * Plans the answer to `messages`. Precedence: call directives without tool results after the last
 * user message → tool calls (with `[preface]`, after the message's text without directives);
 * call directives with tool results → one `Tool NAME returned: ...`
 * line per result; otherwise text directives (`[echo-system]`, `[history]`) in the order written,
 * joined by "\n"; otherwise `Echo: <message without directives>`.
 */
export function planResponse(messages: ChatCompletionRequest["messages"]): Plan {
  const lastUser = messages.findLastIndex((m) => m.role === "user");
  const userText = lastUser >= 0 ? contentText(messages[lastUser]?.content) : "";
  const { directives, rest } = parseDirectives(userText);
  const after = lastUser >= 0 ? messages.slice(lastUser + 1) : [];
  const toolResults = after.filter((m) => m.role === "tool");

  let answer: Answer;
  if (directives.calls.length > 0 && toolResults.length === 0) {
    const offset = countToolCalls(messages);
    answer = {
      kind: "tool_calls",
      calls: directives.calls.map((c, i) => ({ id: `call_${offset + i + 1}`, name: c.name, arguments: c.arguments })),
      ...(directives.preface && rest ? { text: rest } : {}),
    };
  } else if (directives.calls.length > 0) {
    answer = { kind: "text", text: describeToolResults(toolResults, after, directives) };
  } else if (directives.text.length > 0) {
    const before = lastUser >= 0 ? messages.slice(0, lastUser) : messages;
    const parts = directives.text.map((d) => (d === "echo-system" ? systemPrompt(messages) : history(before)));
    answer = { kind: "text", text: parts.join("\n") };
  } else {
    answer = { kind: "text", text: `Echo: ${rest}` };
  }
  return { directives, answer, usage: computeUsage(messages, answer, directives.usage) };
}

function describeToolResults(results: ChatMessage[], after: ChatMessage[], directives: Directives): string {
  const names = new Map<string, string>();
  for (const m of after) for (const tc of m.tool_calls ?? []) if (tc.function) names.set(tc.id, tc.function.name);
  return results
    .map((r, i) => {
      const name = (r.tool_call_id !== undefined ? names.get(r.tool_call_id) : undefined) ?? directives.calls[i]?.name ?? "unknown";
      return `Tool ${name} returned: ${contentText(r.content)}`;
    })
    .join("\n");
}

/** All system (and developer) messages' content, joined by "\n". */
function systemPrompt(messages: ChatMessage[]): string {
  return messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => contentText(m.content))
    .join("\n");
}

function history(before: ChatMessage[]): string {
  return before
    .filter((m) => m.role === "user")
    .map((m) => contentText(m.content))
    .join(" | ");
}

/** Tool calls already in the conversation, so that new ids do not collide with earlier turns'. */
function countToolCalls(messages: ChatMessage[]): number {
  return messages.reduce((n, m) => n + (m.tool_calls?.length ?? 0), 0);
}

/**
 * Deterministic usage: ceil(chars / 4) of the request's message contents (plus tool-call names
 * and arguments) for the prompt and of the answer for the completion; `[usage:N]` forces
 * completion = total = N and prompt = 0.
 */
export function computeUsage(messages: ChatMessage[], answer: Answer, forced?: number): Usage {
  if (forced !== undefined) return { prompt_tokens: 0, completion_tokens: forced, total_tokens: forced };
  let promptChars = 0;
  for (const m of messages) {
    promptChars += charCount(contentText(m.content));
    for (const tc of m.tool_calls ?? []) if (tc.function) promptChars += charCount(tc.function.name) + charCount(tc.function.arguments);
  }
  const outputChars =
    answer.kind === "text" ? charCount(answer.text) : answer.calls.reduce((n, c) => n + charCount(c.name) + charCount(c.arguments), charCount(answer.text ?? ""));
  const prompt = estimateTokens(promptChars);
  const completion = estimateTokens(outputChars);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
