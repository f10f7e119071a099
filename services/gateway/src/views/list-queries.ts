import { Prisma, type PrismaClient } from "@agentrun/db";
import { fieldRefused } from "@agentrun/errors";
import type { TaskStatusValue } from "@agentrun/contracts";
import type { AuthContext } from "../request-context";
import { checkTaskOwner } from "../tasks/task-access";

/**
 * The two hottest reads (`GET /tasks`, `GET /messages`) as one statement each, with PostgreSQL
 * building the response body: the gateway sends the text as it comes. A task is shown as
 * `toTaskView` shows it (`GET /tasks/{id}`), keys in the same order (json, not jsonb, keeps
 * them); a message as the `MessageView` contract says (these statements are its only view).
 */

/** A timestamp column as `Date.toISOString` writes it. */
export const iso = (column: string) => Prisma.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

const taskFields = Prisma.sql`'task_id', t.id, 'title', t.title, 'status', t.status, 'created_at', ${iso("t.created_at")},
    'updated_at', ${iso("t.updated_at")}, 'run_count', t.run_count, 'credits_used', t.credits_used`;
const hasMetadata = Prisma.sql`jsonb_typeof(t.metadata) IN ('object', 'array')`;

/**
 * Task `t` as json, as `toTaskView` shows it, followed by `extra` (key, value pairs, if any).
 * One json_build_object per combination of the optional keys (cheaper than concatenating jsonb).
 */
export function taskViewSql(extra: Prisma.Sql = Prisma.empty): Prisma.Sql {
  return Prisma.sql`CASE
    WHEN t.user_id IS NOT NULL AND ${hasMetadata} THEN json_build_object(${taskFields}, 'user_id', t.user_id, 'metadata', t.metadata ${extra})
    WHEN t.user_id IS NOT NULL THEN json_build_object(${taskFields}, 'user_id', t.user_id ${extra})
    WHEN ${hasMetadata} THEN json_build_object(${taskFields}, 'metadata', t.metadata ${extra})
    ELSE json_build_object(${taskFields} ${extra}) END`;
}
const taskView = taskViewSql();

// json (text) rather than jsonb: a page of messages is bigger, and json skips the binary round trip.
const messageView = Prisma.sql`CASE WHEN m.role = 'tool'
  THEN json_build_object('message_id', m.id, 'task_id', m.task_id, 'run_id', m.run_id, 'role', m.role, 'content', m.content,
    'created_at', ${iso("m.created_at")}, 'tool', m.tool, 'action', m.action, 'params', coalesce(m.params, '{}'), 'result', coalesce(m.result, 'null'))
  ELSE json_build_object('message_id', m.id, 'task_id', m.task_id, 'run_id', m.run_id, 'role', m.role, 'content', m.content,
    'created_at', ${iso("m.created_at")}) END`;

export interface TaskListQuery {
  limit: number;
  offset: number;
  status?: TaskStatusValue;
}

/**
 * `{tasks, total}` of the caller's agent, newest first, on the (agent_id[, status], created_at
 * DESC, id DESC) indexes; the total from the trigger-kept `task_counts`, which stays cheap at
 * millions of tasks (an agent's tasks all belong to its organization).
 */
export async function taskListBody(prisma: PrismaClient, auth: AuthContext, q: TaskListQuery): Promise<string> {
  const [row] = await prisma.$queryRaw<{ body: string }[]>(taskListSql(auth, q));
  return row!.body;
}

/** The statement behind {@link taskListBody} (also explained by the benchmark). */
export function taskListSql(auth: Pick<AuthContext, "orgId" | "agentId">, q: TaskListQuery): Prisma.Sql {
  const status = q.status ? Prisma.sql`AND status = ${q.status}::"TaskStatus"` : Prisma.empty;
  return Prisma.sql`
    SELECT json_build_object(
      'tasks', (SELECT coalesce(json_agg(${taskView} ORDER BY t.created_at DESC, t.id DESC), '[]')
        FROM (SELECT * FROM tasks WHERE agent_id = ${auth.agentId} AND org_id = ${auth.orgId} ${status}
              ORDER BY created_at DESC, id DESC LIMIT ${q.limit} OFFSET ${q.offset}) t),
      'total', (SELECT coalesce(sum(n), 0)::bigint FROM task_counts WHERE agent_id = ${auth.agentId} ${status})
    )::text AS body`;
}

export interface MessageListQuery {
  task_id: string;
  limit: number;
  before?: string;
}

interface MessagePageRow {
  orgId: string | null;
  agentId: string | null;
  cursor_found: boolean;
  body: string;
}

/**
 * Most of a page of a list whose rows may be megabytes each (messages, runs, a task's run
 * summaries), in bytes of their stored text: a page ends once its rows pass this (with
 * `has_more`), so that no page of 200 megabyte-sized rows is built whole in PostgreSQL and in the
 * gateway's memory. A page holds at least one row, whatever its size. For messages the measure
 * is their content, and params and results as stored, which may be compressed: as sent, a page
 * can be larger (a tool message's content is its result as text, and JSON escapes it again).
 */
export const PAGE_MAX_BYTES = 8 * 1024 * 1024;

/**
 * What a run counts in a page's budget beyond its query and output: its other fields as sent
 * (ids, status, figures, times). A task of many short runs then also ends a page, at most
 * {@link RUNS_PER_PAGE_MAX} of them, rather than sending hundreds of thousands in one answer.
 */
export const RUN_OVERHEAD_BYTES = 512;
/** Most runs one page (or a task's summaries) can hold: {@link PAGE_MAX_BYTES} of their overhead alone. */
export const RUNS_PER_PAGE_MAX = PAGE_MAX_BYTES / RUN_OVERHEAD_BYTES;

/**
 * `{messages, has_more}`: the newest `limit` messages of the task (before the `before` message),
 * oldest first, on the (task_id, created_at, id) index, in the same statement as the task's
 * ownership check: 404 task_not_found / 403 forbidden / 400 for a `before` of another task.
 * Fewer when they pass {@link PAGE_MAX_BYTES}.
 */
export async function messageListBody(prisma: PrismaClient, auth: AuthContext, q: MessageListQuery): Promise<string> {
  const [row] = await prisma.$queryRaw<MessagePageRow[]>(messageListSql(q));
  // (`task_id` is an id, up to 100 characters, as the contract's query schema checked.)
  checkTaskOwner(row?.orgId && row.agentId ? { orgId: row.orgId, agentId: row.agentId } : null, auth, q.task_id);
  if (!row!.cursor_found) throw fieldRefused("before", `'before' names no message of task '${q.task_id}'.`);
  return row!.body;
}

/** The statement behind {@link messageListBody} (also explained by the benchmark). */
export function messageListSql(q: MessageListQuery): Prisma.Sql {
  const cursor = q.before
    ? Prisma.sql`AND (m.created_at, m.id) < (SELECT created_at, id FROM messages WHERE id = ${q.before} AND task_id = ${q.task_id})`
    : Prisma.empty;
  // The newest limit + 1 messages with their sizes (the text, and the tool call's stored params
  // and result, read from their headers: nothing is decompressed to measure them), each marked
  // `kept` while within `limit` and the byte budget (one window pass); one not kept means there
  // are more.
  return Prisma.sql`
    WITH page AS (
      SELECT m.*, row_number() OVER w <= ${q.limit} AND sum(m.bytes) OVER w - m.bytes <= ${PAGE_MAX_BYTES} AS kept FROM (
        SELECT *, octet_length(m.content) + coalesce(pg_column_size(m.params), 0) + coalesce(pg_column_size(m.result), 0) AS bytes
        FROM messages m WHERE m.task_id = ${q.task_id} ${cursor}
        ORDER BY m.created_at DESC, m.id DESC LIMIT ${q.limit + 1}
      ) m
      WINDOW w AS (ORDER BY m.created_at DESC, m.id DESC)
    )
    SELECT t.org_id AS "orgId", t.agent_id AS "agentId",
      ${q.before ? Prisma.sql`EXISTS (SELECT 1 FROM messages WHERE id = ${q.before} AND task_id = ${q.task_id})` : Prisma.sql`true`} AS cursor_found,
      json_build_object(
        'messages', (SELECT coalesce(json_agg(${messageView} ORDER BY m.created_at, m.id) FILTER (WHERE m.kept), '[]') FROM page m),
        'has_more', (SELECT coalesce(bool_or(NOT kept), false) FROM page)
      )::text AS body
    FROM (SELECT 1) AS one LEFT JOIN tasks t ON t.id = ${q.task_id}`;
}
