import { Prisma, type PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import type { AuthContext } from "../request-context";
import { iso, taskViewSql } from "./list-queries";

const ID = /^[A-Za-z0-9_-]{1,100}$/;

// A run as the task's `runs` list shows it, in json (see toTaskView for the task's own keys).
const runSummary = Prisma.sql`json_build_object('run_id', r.id, 'status', r.status, 'query', r.query, 'credits_used', r.credits_used,
  'duration_ms', r.duration_ms, 'created_at', ${iso("r.created_at")})`;
const runs = Prisma.sql`, 'runs', (SELECT coalesce(json_agg(${runSummary} ORDER BY r.created_at, r.id), '[]') FROM runs r WHERE r.task_id = t.id)`;

/**
 * `GET /tasks/{id}`'s body: the task and its runs, oldest first, read in one statement (so one
 * snapshot: its `run_count` and `status` agree with its `runs`), with the ownership check:
 * 404 task_not_found / 403 forbidden.
 */
export async function taskDetailBody(prisma: PrismaClient, auth: AuthContext, taskId: string): Promise<string> {
  const [row] = ID.test(taskId)
    ? await prisma.$queryRaw<{ org_id: string; agent_id: string; body: string }[]>`
        SELECT t.org_id, t.agent_id, (${taskViewSql(runs)})::text AS body FROM tasks t WHERE t.id = ${taskId}`
    : [];
  if (!row) throw new AppError("task_not_found", { message: `No task has the id '${taskId.slice(0, 100)}'.` });
  if (row.org_id !== auth.orgId || row.agent_id !== auth.agentId) throw new AppError("forbidden", { message: "This task belongs to another organization or agent." });
  return row.body;
}
