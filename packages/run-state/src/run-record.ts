import type { RunEvent } from "@agentrun/contracts";
import type { MessageRole } from "@agentrun/db";

/** A message of a run, as its end stores it. */
export interface MessageRecord {
  role: MessageRole;
  content: string;
  tool?: string;
  action?: string;
  toolCallId?: string;
  params?: Record<string, unknown>;
  result?: unknown;
}

/** What a run's events say it did, as its worker would have recorded it. */
export interface EventRecord {
  /**
   * The messages after the user's query: what the model said before each of its tool calls, and
   * each call with its result. Not the text of its last model call (see `lastText`).
   */
  messages: MessageRecord[];
  /** The text its events streamed in its last model call, after its last tool call. */
  lastText: string;
  /** Tool calls made: those with a result (every call has one once the run ends). */
  toolCalls: number;
}

/**
 * The record of a run rebuilt from its `events` (all of them, in order), for an end made by
 * someone other than its worker (a sweeper, a worker taking its job over, a forced cancel): the
 * worker's own record of messages and tool calls is gone with it, and the events hold the same.
 */
export function recordOfEvents(events: readonly RunEvent[]): EventRecord {
  const messages: MessageRecord[] = [];
  const params = new Map<string, Record<string, unknown>>();
  let text = "";
  let toolCalls = 0;
  // Text followed by a tool call is what the model said before calling tools: a message of its own.
  const sayText = () => {
    if (text) messages.push({ role: "assistant", content: text });
    text = "";
  };
  for (const e of events) {
    if (e.type === "text_chunk" && typeof e.content === "string") text += e.content;
    else if (e.type === "tool_call") {
      sayText();
      if (e.call_id && e.params) params.set(e.call_id, e.params);
    } else if (e.type === "tool_result") {
      sayText();
      toolCalls++;
      messages.push({
        role: "tool",
        content: JSON.stringify(e.result ?? null),
        tool: e.tool,
        action: e.action,
        params: e.call_id ? params.get(e.call_id) : undefined,
        result: e.result,
        toolCallId: e.call_id,
      });
    }
  }
  return { messages, lastText: text, toolCalls };
}
