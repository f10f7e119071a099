import { Prisma, type PrismaClient } from "@agentrun/db";
import { fieldRefused } from "@agentrun/errors";
import type { RunView } from "@agentrun/contracts";
import { PAGE_MAX_BYTES, RUN_OVERHEAD_BYTES, RUNS_PER_PAGE_MAX } from "./list-queries";
import { toRunView, type RunFields } from "./run.view";

export interface RunListQuery {
  taskId: string;
  limit?: number;
  after?: string;
}

interface RunPageRow extends RunFields {
  has_more: boolean;
}

/**
 * `{runs, has_more}`: the task's runs oldest first, after the run `after` (400 when it names no
 * run of the task), at most `limit` of them and fewer once their queries and outputs, and
 * {@link RUN_OVERHEAD_BYTES} each, pass {@link PAGE_MAX_BYTES}. The task's ownership is the caller's to check first.
 */
export async function runListPage(prisma: PrismaClient, q: RunListQuery): Promise<{ runs: RunView[]; has_more: boolean }> {
  if (q.after) {
    const cursor = await prisma.run.findFirst({ where: { id: q.after, taskId: q.taskId }, select: { id: true } });
    if (!cursor) throw fieldRefused("after", `'after' names no run of task '${q.taskId}'.`);
  }
  const after = q.after
    ? Prisma.sql`AND (r.created_at, r.id) > (SELECT created_at, id FROM runs WHERE id = ${q.after} AND task_id = ${q.taskId})`
    : Prisma.empty;
  const pageMax = Math.min(q.limit ?? RUNS_PER_PAGE_MAX, RUNS_PER_PAGE_MAX);
  // Each run's size read from the columns' headers (one run more than a page holds, so that
  // has_more tells whether any was left out), then `kept` while within the limit and the budget
  // (one window pass); only the runs kept are sent.
  const rows = await prisma.$queryRaw<RunPageRow[]>`
    WITH sized AS (
      SELECT r.id, octet_length(r.query) + octet_length(r.output) + ${RUN_OVERHEAD_BYTES}::integer AS bytes, r.created_at
      FROM runs r WHERE r.task_id = ${q.taskId} ${after}
      ORDER BY r.created_at, r.id LIMIT ${pageMax + 1}
    ), marked AS (
      SELECT s.id, row_number() OVER w <= ${pageMax}::integer AND sum(s.bytes) OVER w - s.bytes <= ${PAGE_MAX_BYTES} AS kept
      FROM sized s WINDOW w AS (ORDER BY s.created_at, s.id)
    )
    SELECT r.id, r.task_id AS "taskId", r.status::text AS status, r.query, r.output, r.credits_used AS "creditsUsed",
      r.duration_ms AS "durationMs", r.created_at AS "createdAt", r.started_at AS "startedAt", r.completed_at AS "completedAt",
      r.error_code AS "errorCode", r.error_message AS "errorMessage", r.finish_reason AS "finishReason",
      (SELECT coalesce(bool_or(NOT kept), false) FROM marked) AS has_more
    FROM marked m JOIN runs r ON r.id = m.id
    WHERE m.kept
    ORDER BY r.created_at, r.id`;
  return { runs: rows.map(toRunView), has_more: rows[0]?.has_more ?? false };
}
