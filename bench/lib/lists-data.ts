import { performance } from "node:perf_hooks";
import pg from "pg";
import { generateApiKey } from "@agentrun/api-keys";
import { messageListSql, taskListSql } from "../../services/gateway/src/views/list-queries";

/** Fixed ids of the organization and agent that own the seeded tasks, so seeding happens once. */
export const LISTS_ORG = "org_bench_lists";
export const LISTS_AGENT = "agt_bench_lists";
export const TASK_COUNT = 1_000_000;
export const MESSAGE_COUNT = 5_000;
/** The newest of `taskCount` seeded tasks (first on the list), which holds the messages. */
export const messagesTaskOf = (taskCount: number) => `task_${taskCount.toString(16).padStart(32, "0")}`;
export const MESSAGES_TASK = messagesTaskOf(TASK_COUNT);

export interface SeedReport {
  tasksSeeded: boolean;
  messagesSeeded: boolean;
  /** The agent's task counters were rebuilt (with the tasks, or because they did not add up). */
  countsRebuilt: boolean;
  seedMs: number;
}

/**
 * Seeds 1,000,000 tasks for one agent (one INSERT … SELECT over generate_series; ids
 * `task_` + 32 hex digits, increasing with created_at, which is spread over the last year, so
 * both orders agree as with real time-ordered ids) and 5,000 messages on the newest task.
 * Checks the counts first: an already seeded database is left as it is. Everything is written in
 * one transaction, so that a seed cut short leaves nothing behind; counters that do not add up
 * to the tasks (whatever left them so) are rebuilt.
 */
export async function seedLists(client: pg.Client, sizes = { tasks: TASK_COUNT, messages: MESSAGE_COUNT }): Promise<SeedReport> {
  const t0 = performance.now();
  const messagesTask = messagesTaskOf(sizes.tasks);
  await client.query("SET synchronous_commit = off");
  await client.query("BEGIN");
  try {
    await client.query(
      `INSERT INTO organizations (id, name, plan, rpm_limit, credit_balance, updated_at) VALUES ($1, 'bench lists', 'enterprise', 10000000, 0, now()) ON CONFLICT (id) DO NOTHING`,
      [LISTS_ORG],
    );
    await client.query(
      `INSERT INTO agents (id, org_id, name, model, tools, http_allowlist, updated_at) VALUES ($1, $2, 'bench lists', 'scripted', '{}', '{}', now()) ON CONFLICT (id) DO NOTHING`,
      [LISTS_AGENT, LISTS_ORG],
    );
    const tasks = Number((await client.query("SELECT count(*) AS n FROM tasks WHERE agent_id = $1", [LISTS_AGENT])).rows[0].n);
    const newest = (await client.query("SELECT 1 FROM tasks WHERE id = $1 AND agent_id = $2", [messagesTask, LISTS_AGENT])).rowCount === 1;
    const tasksSeeded = tasks !== sizes.tasks || !newest;
    // The row-level trigger that keeps task_counts (migration task_counts) updates the same ~80
    // counter rows once per inserted task; within one transaction every update adds a version
    // that later updates must walk past, so a 1,000,000-row INSERT never finishes. Seed with
    // triggers off (session_replication_role = replica, also skipping FK checks: the data is
    // consistent by construction) and rebuild this agent's counters the way the migration does.
    await client.query("SET LOCAL session_replication_role = replica");
    if (tasksSeeded) {
      await client.query("DELETE FROM messages WHERE task_id IN (SELECT id FROM tasks WHERE agent_id = $1)", [LISTS_AGENT]);
      await client.query("DELETE FROM tasks WHERE agent_id = $1", [LISTS_AGENT]);
      await client.query(
        `INSERT INTO tasks (id, org_id, agent_id, title, status, user_id, run_count, credits_used, created_at, updated_at)
         SELECT 'task_' || lpad(to_hex(i), 32, '0'), $1, $2, 'Benchmark task ' || i,
                (ARRAY['completed', 'completed', 'completed', 'failed', 'pending']::"TaskStatus"[])[1 + i % 5],
                'user_' || (i % 1000), 1 + i % 3, 1 + i % 7,
                ts, ts + interval '5 seconds'
         FROM generate_series(1, $3::int) AS i,
              LATERAL (SELECT now() - interval '365 days' + (i * (interval '365 days' / $3::int)) AS ts) AS t`,
        [LISTS_ORG, LISTS_AGENT, sizes.tasks],
      );
    }
    const messages = Number((await client.query("SELECT count(*) AS n FROM messages WHERE task_id = $1", [messagesTask])).rows[0].n);
    const messagesSeeded = tasksSeeded || messages !== sizes.messages;
    if (messagesSeeded) {
      await client.query("DELETE FROM messages WHERE task_id = $1", [messagesTask]);
      await client.query(
        `INSERT INTO messages (id, task_id, role, content, created_at)
         SELECT 'msg_' || lpad(to_hex(i), 32, '0'), $1,
                (CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END)::"MessageRole",
                'Benchmark message ' || i || ': ' || repeat('lorem ipsum ', 8),
                (SELECT created_at FROM tasks WHERE id = $1) + i * interval '1 second'
         FROM generate_series(1, $2::int) AS i`,
        [messagesTask, sizes.messages],
      );
    }
    const counted = (await client.query("SELECT to_regclass('task_counts') IS NOT NULL AS ok")).rows[0].ok;
    const countedTasks = counted ? Number((await client.query("SELECT coalesce(sum(n), 0) AS n FROM task_counts WHERE agent_id = $1", [LISTS_AGENT])).rows[0].n) : sizes.tasks;
    const countsRebuilt = counted && (tasksSeeded || countedTasks !== sizes.tasks);
    if (countsRebuilt) {
      await client.query("DELETE FROM task_counts WHERE agent_id = $1", [LISTS_AGENT]);
      await client.query(
        `INSERT INTO task_counts (agent_id, status, shard, n)
         SELECT agent_id, status, abs(hashtext(id)::bigint) % 16, count(*) FROM tasks WHERE agent_id = $1 GROUP BY 1, 2, 3`,
        [LISTS_AGENT],
      );
    }
    await client.query("COMMIT");
    // Statistics and the visibility map (index-only scans) as a database that has been running a while.
    if (tasksSeeded || messagesSeeded) await client.query(`VACUUM (ANALYZE) tasks, messages${counted ? ", task_counts" : ""}`);
    return { tasksSeeded, messagesSeeded, countsRebuilt, seedMs: performance.now() - t0 };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  }
}

/** A new API key of the lists organization (keys accumulate harmlessly across invocations). */
export async function createListsKey(client: pg.Client): Promise<Record<string, string>> {
  const key = generateApiKey();
  const id = `key_bench_${Date.now().toString(16)}${Math.random().toString(16).slice(2, 10)}`;
  await client.query("INSERT INTO api_keys (id, org_id, prefix, key_hash, name) VALUES ($1, $2, $3, $4, 'bench')", [id, LISTS_ORG, key.prefix, key.keyHash]);
  return { authorization: `Bearer ${key.apiKey}`, "x-agent-id": LISTS_AGENT };
}

/**
 * The list queries as the gateway runs them (equivalent SQL of its Prisma calls in
 * services/gateway/src/routes/tasks.routes.ts and messages.routes.ts), for EXPLAIN. The total
 * of GET /api/tasks comes from the trigger-kept task_counts (16 shards per agent and status).
 */
/** The statements the gateway runs for the two list endpoints (its own builders), and an exact count for comparison. */
export function listQueries(): { name: string; sql: string; params: unknown[]; gateway: boolean }[] {
  const tasks = taskListSql({ orgId: LISTS_ORG, agentId: LISTS_AGENT }, { limit: 20, offset: 0 });
  const messages = messageListSql({ task_id: MESSAGES_TASK, limit: 50 });
  return [
    { name: "GET /api/tasks statement (page + total)", sql: tasks.text, params: tasks.values, gateway: true },
    { name: "GET /api/messages statement", sql: messages.text, params: messages.values, gateway: true },
    { name: "tasks count(*)", sql: `SELECT count(*) FROM tasks WHERE agent_id = $1`, params: [LISTS_AGENT], gateway: false },
  ];
}

export interface Plan {
  name: string;
  sql: string;
  plan: string[];
  /** The scan nodes of the plan, e.g. "Index Scan using tasks_pkey on tasks t". */
  scans: string[];
  /** Run by the gateway (false: shown for comparison). */
  gateway: boolean;
  usesIndex: boolean;
  executionMs: number | null;
}

/** A parameter as an SQL literal, for `EXECUTE` (which takes no bound parameters). */
function literal(client: pg.Client, v: unknown): string {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (v instanceof Date) return client.escapeLiteral(v.toISOString());
  return client.escapeLiteral(typeof v === "string" ? v : JSON.stringify(v));
}

const planLines = (res: pg.QueryResult) => res.rows.map((r: Record<string, string>) => r["QUERY PLAN"]!);

/**
 * EXPLAIN (ANALYZE, BUFFERS) of one statement with its parameters: planned for their values, or
 * (`generic`) as the generic plan of a prepared statement, which is what PostgreSQL may switch a
 * named prepared statement to after five runs.
 */
async function explainOne(client: pg.Client, sql: string, params: unknown[], generic: boolean): Promise<string[]> {
  try {
    if (!generic) return planLines(await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params));
    await client.query(`PREPARE bench_generic AS ${sql}`);
    await client.query("SET plan_cache_mode = force_generic_plan");
    return planLines(await client.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_generic(${params.map((v) => literal(client, v)).join(", ")})`));
  } catch (err) {
    return [`EXPLAIN failed: ${(err as Error).message}`];
  } finally {
    if (generic) {
      await client.query("RESET plan_cache_mode").catch(() => {});
      await client.query("DEALLOCATE bench_generic").catch(() => {});
    }
  }
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of each list statement. A plan "uses indexes" when it reads the
 * big tables (tasks, messages) only through index scans; the per-agent counter rows of
 * `task_counts` are a few pages, where a sequential scan is the planner's right choice. The
 * gateway's statements are explained twice: planned for their parameter values, and as the
 * generic plan that PostgreSQL may switch its named prepared statements to after five runs;
 * both must use indexes.
 */
/**
 * Whether the EXPLAIN output `text` (one plan or several) reads the list tables through indexes
 * only: some index scan, no sequential scan of tasks or messages, and no plan that failed.
 */
export function plansUseIndexes(text: string): boolean {
  return /Index (Only )?Scan/.test(text) && !/Seq Scan on (tasks|messages)\b/.test(text) && !text.includes("EXPLAIN failed");
}

export async function explainLists(client: pg.Client): Promise<Plan[]> {
  const out: Plan[] = [];
  for (const q of listQueries()) {
    const custom = await explainOne(client, q.sql, q.params, false);
    const plan = q.gateway ? [...custom, "-- generic plan:", ...(await explainOne(client, q.sql, q.params, true))] : custom;
    const text = plan.join("\n");
    const exec = /Execution Time: ([\d.]+) ms/.exec(text);
    const scans = plan.map((l) => /((?:Parallel )?(?:Index Only Scan|Index Scan Backward|Index Scan|Bitmap Index Scan|Bitmap Heap Scan|Seq Scan)(?: using \S+)? on \S+)/.exec(l)?.[1]).filter((x): x is string => !!x);
    out.push({ name: q.name, sql: q.sql, plan, scans: [...new Set(scans)], gateway: q.gateway, usesIndex: plansUseIndexes(text), executionMs: exec ? Number(exec[1]) : null });
  }
  return out;
}
