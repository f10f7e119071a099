import { Prisma, type PrismaClient } from "@agentrun/db";
import { fieldRefused } from "@agentrun/errors";
import type { RunView } from "@agentrun/contracts";
import { PAGE_MAX_BYTES } from "./list-queries";
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
 * run of the task), at most `limit` of them and fewer once their queries and outputs pass
 * {@link PAGE_MAX_BYTES}. The task's ownership is the caller's to check first.
 */
export async function runListPage(prisma: PrismaClient, q: RunListQuery): Promise<{ runs: RunView[]; has_more: boolean }> {
  if (q.after) {
    const cursor = await prisma.run.findFirst({ where: { id: q.after, taskId: q.taskId }, select: { id: true } });
    if (!cursor) throw fieldRefused("after", `'after' names no run of task '${q.taskId}'.`);
  }
  const after = q.after
    ? Prisma.sql`AND (r.created_at, r.id) > (SELECT created_at, id FROM runs WHERE id = ${q.after} AND task_id = ${q.taskId})`
    : Prisma.empty;
  const limit = q.limit === undefined ? Prisma.sql`ALL` : Prisma.sql`${q.limit + 1}`;
  // Each run's size read from the columns' headers, then `kept` while within the limit and the
  // budget (one window pass); only the runs kept are sent, with whether any was left out.
  const rows = await prisma.$queryRaw<RunPageRow[]>`
    WITH sized AS (
      SELECT r.id, octet_length(r.query) + octet_length(r.output) AS bytes, r.created_at
      FROM runs r WHERE r.task_id = ${q.taskId} ${after}
      ORDER BY r.created_at, r.id LIMIT ${limit}
    ), marked AS (
      SELECT s.id, (row_number() OVER w <= ${q.limit ?? null}::integer OR ${q.limit ?? null}::integer IS NULL)
               AND sum(s.bytes) OVER w - s.bytes <= ${PAGE_MAX_BYTES} AS kept
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
