import type { PrismaClient, Run, Task } from "@agentrun/db";
import { AppError, echoed } from "@agentrun/errors";
import type { AuthContext } from "../request-context";

const ID = /^[A-Za-z0-9_-]{1,100}$/;

/** Whether `id` has the shape of this service's ids: a lookup of anything else finds nothing. */
export const isIdShaped = (id: string): boolean => ID.test(id);

/**
 * `task` (as read for `taskId`; null when there is none) if it belongs to the caller's
 * organization and agent: 404 task_not_found / 403 forbidden otherwise.
 */
export function checkTaskOwner<T extends { orgId: string; agentId: string }>(task: T | null, auth: AuthContext, taskId: string): T {
  if (!task) throw new AppError("task_not_found", { message: `No task has the id '${echoed(taskId)}'.` });
  if (task.orgId !== auth.orgId || task.agentId !== auth.agentId) throw new AppError("forbidden", { message: "This task belongs to another organization or agent." });
  return task;
}

/** The task, if it belongs to the caller's organization and agent: 404 task_not_found / 403 forbidden otherwise. */
export async function ownedTask(prisma: PrismaClient, auth: AuthContext, taskId: string): Promise<Task> {
  return checkTaskOwner(isIdShaped(taskId) ? await prisma.task.findUnique({ where: { id: taskId } }) : null, auth, taskId);
}

/** `run` (as read for `runId`; null when there is none) if it is a run of `task`: 404 run_not_found otherwise. */
export function checkRunOfTask<R extends { taskId: string }>(run: R | null, task: { id: string }, runId: string): R {
  if (!run || run.taskId !== task.id) throw new AppError("run_not_found", { message: `Task '${task.id}' has no run '${echoed(runId)}'.` });
  return run;
}

/** A run of an owned task: 404 run_not_found when the task has no such run. */
export async function ownedRun(prisma: PrismaClient, auth: AuthContext, taskId: string, runId: string): Promise<{ task: Task; run: Run }> {
  const task = await ownedTask(prisma, auth, taskId);
  const run = checkRunOfTask(isIdShaped(runId) ? await prisma.run.findUnique({ where: { id: runId } }) : null, task, runId);
  return { task, run };
}
