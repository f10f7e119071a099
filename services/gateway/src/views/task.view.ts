import type { Message, Task } from "@agentrun/db";
import type { MessageView, TaskView } from "@agentrun/contracts";

export function toTaskView(t: Task): TaskView {
  const view: TaskView = {
    task_id: t.id,
    title: t.title,
    status: t.status,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    run_count: t.runCount,
    credits_used: t.creditsUsed,
  };
  if (t.userId) view.user_id = t.userId;
  if (t.metadata && typeof t.metadata === "object") view.metadata = t.metadata as Record<string, unknown>;
  return view;
}

export function toMessageView(m: Message): MessageView {
  const view: MessageView = { message_id: m.id, task_id: m.taskId, run_id: m.runId, role: m.role, content: m.content, created_at: m.createdAt.toISOString() };
  if (m.role === "tool") Object.assign(view, { tool: m.tool, action: m.action, params: m.params ?? {}, result: m.result ?? null });
  return view;
}
