import type { PrismaClient, Run, Task } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import type { AuthContext } from "../request-context";

const ID = /^[A-Za-z0-9_-]{1,100}$/;

/** The task, if it belongs to the caller's organization and agent: 404 task_not_found / 403 forbidden otherwise. */
export async function ownedTask(prisma: PrismaClient, auth: AuthContext, taskId: string): Promise<Task> {
  const task = ID.test(taskId) ? await prisma.task.findUnique({ where: { id: taskId } }) : null;
  if (!task) throw new AppError("task_not_found", { message: `No task has the id '${taskId.slice(0, 100)}'.` });
  if (task.orgId !== auth.orgId || task.agentId !== auth.agentId) throw new AppError("forbidden", { message: "This task belongs to another organization or agent." });
  return task;
}

/** A run of an owned task: 404 run_not_found when the task has no such run. */
export async function ownedRun(prisma: PrismaClient, auth: AuthContext, taskId: string, runId: string): Promise<{ task: Task; run: Run }> {
  const task = await ownedTask(prisma, auth, taskId);
  const run = ID.test(runId) ? await prisma.run.findUnique({ where: { id: runId } }) : null;
  if (!run || run.taskId !== task.id) throw new AppError("run_not_found", { message: `Task '${task.id}' has no run '${runId.slice(0, 100)}'.` });
  return { task, run };
}
