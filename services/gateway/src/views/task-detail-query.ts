import { Prisma, type PrismaClient } from "@agentrun/db";
import type { AuthContext } from "../request-context";
import { checkTaskOwner, isIdShaped } from "../tasks/task-access";
import { iso, PAGE_MAX_BYTES, RUN_OVERHEAD_BYTES, RUNS_PER_PAGE_MAX, taskViewSql } from "./list-queries";

// A run as the task's `runs` list shows it, in json (see toTaskView for the task's own keys).
const runSummary = Prisma.sql`json_build_object('run_id', r.id, 'status', r.status, 'query', r.query, 'credits_used', r.credits_used,
  'duration_ms', r.duration_ms, 'created_at', ${iso("r.created_at")})`;
// Oldest first, as far as PAGE_MAX_BYTES of their queries and RUN_OVERHEAD_BYTES each (the first
// one whatever its size), so at most RUNS_PER_PAGE_MAX of them:
// a task of thousands of long queries is not built whole; `run_count` tells there are more, and
// `GET /tasks/{id}/runs` pages through them all.
const runs = Prisma.sql`, 'runs', (SELECT coalesce(json_agg(${runSummary} ORDER BY r.created_at, r.id), '[]') FROM (
    SELECT r.*, sum(octet_length(r.query) + ${RUN_OVERHEAD_BYTES}::integer) OVER (ORDER BY r.created_at, r.id) - octet_length(r.query) - ${RUN_OVERHEAD_BYTES}::integer AS before
    FROM (SELECT * FROM runs r WHERE r.task_id = t.id ORDER BY r.created_at, r.id LIMIT ${RUNS_PER_PAGE_MAX}::integer) r
  ) r WHERE r.before <= ${PAGE_MAX_BYTES})`;

/**
 * `GET /tasks/{id}`'s body: the task and its runs, oldest first, read in one statement (so one
 * snapshot: its `run_count` and `status` agree with its `runs`), with the ownership check:
 * 404 task_not_found / 403 forbidden.
 */
export async function taskDetailBody(prisma: PrismaClient, auth: AuthContext, taskId: string): Promise<string> {
  const [row] = isIdShaped(taskId)
    ? await prisma.$queryRaw<{ orgId: string; agentId: string; body: string }[]>`
        SELECT t.org_id AS "orgId", t.agent_id AS "agentId", (${taskViewSql(runs)})::text AS body FROM tasks t WHERE t.id = ${taskId}`
    : [];
  return checkTaskOwner(row ?? null, auth, taskId).body;
}
