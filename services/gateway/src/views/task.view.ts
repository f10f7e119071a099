import type { Task } from "@agentrun/db";
import type { TaskView } from "@agentrun/contracts";

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
