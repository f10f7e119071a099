import type { Run, Message } from "@agentrun/db";
import { isCutFinishReason, type RunView, type ToolCallView } from "@agentrun/contracts";

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The columns a run's view shows. */
export type RunFields = Pick<Run, "id" | "taskId" | "status" | "query" | "output" | "creditsUsed" | "durationMs" | "createdAt" | "startedAt" | "completedAt" | "errorCode" | "errorMessage" | "finishReason">;

export function toRunView(run: RunFields): RunView {
  const view: RunView = {
    run_id: run.id,
    task_id: run.taskId,
    status: run.status,
    query: run.query,
    output: run.output,
    credits_used: run.creditsUsed,
    duration_ms: run.durationMs,
    created_at: run.createdAt.toISOString(),
    started_at: iso(run.startedAt),
    completed_at: iso(run.completedAt),
  };
  if (run.errorCode) view.error = { code: run.errorCode, message: run.errorMessage ?? "" };
  if (run.status === "completed" && isCutFinishReason(run.finishReason)) view.finish_reason = run.finishReason;
  return view;
}

/** Tool messages of a run as `tool_calls`, in the order they were made. */
export function toToolCalls(messages: Pick<Message, "role" | "tool" | "action" | "params" | "result">[]): ToolCallView[] {
  return messages
    .filter((m) => m.role === "tool")
    .map((m) => ({ tool: m.tool ?? "", action: m.action ?? "", params: (m.params as Record<string, unknown>) ?? {}, result: m.result ?? null }));
}
