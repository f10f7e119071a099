import type { RunEvent, RunEventInput } from "@agentrun/contracts";

/** The result of a tool call left open by a run ended by someone else than its worker. */
export const UNFINISHED_TOOL = { code: "stopped", message: "The run ended while this tool ran; its result is unknown." } as const;

/**
 * A `tool_result` for each `tool_call` of `events` (a run's events, in order) that has none: the
 * contract gives every tool call its result, also when the worker that ran the tool is gone.
 */
export function resultsOfOpenToolCalls(events: readonly RunEvent[]): RunEventInput[] {
  const open = new Map<string, { tool: string; action: string }>();
  for (const e of events) {
    if (e.type === "tool_call" && e.call_id) open.set(e.call_id, { tool: e.tool, action: e.action });
    else if (e.type === "tool_result" && e.call_id) open.delete(e.call_id);
  }
  return [...open].map(([callId, { tool, action }]) => ({ type: "tool_result", tool, action, result: { error: UNFINISHED_TOOL }, call_id: callId }));
}
