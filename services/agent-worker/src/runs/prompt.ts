import type { ChatCompletionAssistantMessageParam, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { RunContext } from "@agentrun/contracts";
import type { ModelTurn } from "./model-call";
import { argumentsForModel } from "./tool-call-deltas";

/**
 * Fills `{{user_name}}`, `{{user_id}}` and `{{metadata.KEY}}` from the run context; a missing
 * value (or an unknown placeholder) becomes empty. Objects are inserted as JSON. A metadata key
 * is any text without braces (`{{metadata.first name}}`), as metadata keys are, of at most 200
 * characters.
 */
export function renderInstructions(template: string, ctx: RunContext | undefined): string {
  // Keys of at most 200 characters: an unclosed `{{metadata.` followed by a long text costs a
  // pattern without a bound time that grows with the square of that text.
  return template.replace(/\{\{\s*(metadata\.[^{}]{0,200}?|[A-Za-z0-9_.-]{1,200})\s*\}\}/g, (_m, path: string) => {
    let value: unknown;
    if (path === "user_name") value = ctx?.user_name;
    else if (path === "user_id") value = ctx?.user_id;
    else if (path.startsWith("metadata.")) {
      // Own keys only: `{{metadata.constructor}}` names no value of the request's.
      const metadata = ctx?.metadata;
      const key = path.slice("metadata.".length);
      if (metadata && Object.hasOwn(metadata, key)) value = metadata[key];
    }
    if (value === undefined || value === null) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  });
}

export interface PromptMemory {
  content: string;
  category: string;
}

/**
 * The memory service's answer for the prompt, held to what was asked of it: the run's user's
 * entries only, at most `maxCount` of them and `maxChars` content characters in all, in the
 * order given (an entry that does not fit is left out, as the service does). A faulty service's
 * oversized or foreign answer then cannot make the prompt too large or another user's.
 */
export function memoriesForPrompt<M extends PromptMemory & { user_id: string }>(memories: M[], userId: string, maxCount: number, maxChars: number): M[] {
  const kept: M[] = [];
  let chars = 0;
  for (const m of memories) {
    if (kept.length >= maxCount) break;
    if (m.user_id !== userId || chars + m.content.length > maxChars) continue;
    kept.push(m);
    chars += m.content.length;
  }
  return kept;
}

export interface HistoryMessage {
  role: "user" | "assistant";
  content: string;
}

/**
 * The newest messages of `history` (oldest first) whose characters add up to at most `maxChars`:
 * a task's history grows with every run, and a prompt beyond the model's window would fail every
 * later run of the task. The first message that does not fit ends it, so no gap is left, and
 * it begins with a user message.
 */
export function recentHistory(history: HistoryMessage[], maxChars: number): HistoryMessage[] {
  let chars = 0;
  let start = history.length;
  while (start > 0 && chars + history[start - 1]!.content.length <= maxChars) chars += history[--start]!.content.length;
  // It starts with a question, as a conversation does: an answer whose question was cut (by
  // either limit) is left out too, since some providers refuse a history that starts with one.
  while (start < history.length && history[start]!.role !== "user") start++;
  return start === 0 ? history : history.slice(start);
}

/** System prompt (instructions + what is remembered about the user), the task's history, then the query. */
export function buildMessages(input: {
  instructions: string;
  context?: RunContext;
  memories: PromptMemory[];
  history: HistoryMessage[];
  query: string;
}): ChatCompletionMessageParam[] {
  let system = renderInstructions(input.instructions, input.context);
  if (input.memories.length) {
    // One line per memory: what a user saved cannot start lines of its own (a made-up
    // "- (instruction) …" entry) in the system prompt.
    const lines = input.memories.map((m) => `- (${m.category}) ${m.content.replace(/\s*[\r\n\v\f\u0085\u2028\u2029]+\s*/g, " ")}`).join("\n");
    system = `${system}${system ? "\n\n" : ""}What you remember about this user:\n${lines}`;
  }
  const messages: ChatCompletionMessageParam[] = [];
  if (system) messages.push({ role: "system", content: system });
  // An answer with no text (a run that ended its turn without any) stays in the task's messages
  // but is not sent: providers refuse an assistant message with empty content. What the model
  // said before calling tools and its answer after them, stored as two messages, are one turn
  // of the conversation: sent as one, since some providers refuse two assistant messages in a row.
  for (const h of input.history) {
    if (h.role === "assistant" && h.content === "") continue;
    const last = messages.at(-1);
    if (h.role === "assistant" && last?.role === "assistant") last.content = `${last.content as string}\n\n${h.content}`;
    else messages.push({ role: h.role, content: h.content });
  }
  messages.push({ role: "user", content: input.query });
  return messages;
}

/**
 * The model's answer that asked for tools, as the next call's messages carry it: its text, its
 * calls, and a thinking model's `reasoning_content` (DeepSeek refuses the next call of a turn
 * without it).
 */
export function toolCallMessage(turn: Pick<ModelTurn, "text" | "toolCalls" | "reasoning">): ChatCompletionAssistantMessageParam {
  return {
    role: "assistant",
    content: turn.text || null,
    tool_calls: turn.toolCalls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: argumentsForModel(c.arguments) } })),
    ...(turn.reasoning && { reasoning_content: turn.reasoning }),
  };
}
