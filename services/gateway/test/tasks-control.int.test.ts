import pg from "pg";
import { Redis } from "ioredis";
import { runCancelKey } from "@agentrun/events";
import { createTenant, eventually, readSse, startStack, testEnv, testPrisma, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import { newId, type PrismaClient } from "@agentrun/db";
import { taskListSql } from "../src/views/list-queries";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  // One run at a time, so a second run stays queued while the first one is busy.
  stack = await startStack({ memory: false, workerEnv: { WORKER_CONCURRENCY: "1" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { credits: 10_000 });
});
afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

const post = (path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${stack.gatewayUrl}/api${path}`, {
    method: "POST",
    headers: { ...tenant.headers, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

describe("cancel", () => {
  it("stops a running run promptly: the stream ends with run_cancelled and credits match what it consumed", async () => {
    const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:300][chunks:50] cancel me" }, headers: tenant.headers });
    await w.waitFor((e) => e.type === "text_chunk");
    const { run_id, task_id } = w.events[0];
    const t0 = Date.now();
    const res = await post(`/tasks/${task_id}/runs/${run_id}/cancel`);
    expect(res.status).toBe(202);
    expect(res.body.run_id).toBe(run_id);
    const done = await w.result;
    expect(done.events.at(-1)!.data).toMatchObject({ type: "run_cancelled", run_id });
    const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id }, include: { task: true } });
    expect(run.status).toBe("cancelled");
    expect(run.completedAt!.getTime() - t0).toBeLessThan(1500);
    expect(run.task.status).toBe("completed");
    expect(run.task.activeRunId).toBeNull();
    expect(run.output.length).toBeGreaterThan(0);
    expect(run.output.length).toBeLessThan("Echo: cancel me".length);
    // The model never reported its usage (it comes with the last chunk): the run pays for the
    // prompt the model read and the answer it streamed, estimated at four characters per token.
    expect(run.completionTokens).toBe(Math.ceil(run.output.length / 4));
    expect(run.promptTokens).toBeGreaterThanOrEqual(Math.ceil("[sleep:300][chunks:50] cancel me".length / 4));
    expect(run.creditsUsed).toBe(1 + Math.ceil((run.promptTokens + run.completionTokens) / 1000));
    expect(run.creditsUsed).toBe(2);
    expect(run.task.creditsUsed).toBe(2);
    // The cancel is recorded on the run, and its flag went with the end its worker wrote (a flag
    // outlives a run's wait for a worker only while the run is not ended).
    expect(run.cancelRequestedAt).toBeInstanceOf(Date);
    const flags = new Redis(stack.env.REDIS_URL!);
    try {
      expect(await flags.exists(runCancelKey(stack.env.REDIS_PREFIX!, run_id))).toBe(0);
    } finally {
      flags.disconnect();
    }
    // Cancelling again changes nothing.
    const again = await post(`/tasks/${task_id}/runs/${run_id}/cancel`);
    expect(again).toMatchObject({ status: 202, body: { status: "cancelled" } });
  });

  it("cancels a queued run before any worker starts it", async () => {
    const busy = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:150][chunks:10] busy" }, headers: tenant.headers });
    await busy.waitFor((e) => e.type === "text_chunk");
    const queued = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "waiting in line" }, headers: tenant.headers });
    await queued.waitFor((e) => e.type === "run_started");
    const { run_id, task_id } = queued.events[0];
    expect((await prisma.run.findUniqueOrThrow({ where: { id: run_id } })).status).toBe("queued");
    const res = await post(`/tasks/${task_id}/runs/${run_id}/cancel`);
    expect(res.body.status).toBe("cancelled");
    expect((await queued.result).events.map((e) => e.data.type)).toEqual(["run_started", "run_cancelled"]);
    const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id }, include: { task: true } });
    // It never reached the model: it costs nothing, and its reservation is back.
    expect(run.creditsUsed).toBe(0);
    expect(run.task.creditsUsed).toBe(0);
    const ledger = await prisma.creditLedgerEntry.findMany({ where: { runId: run_id }, orderBy: { seq: "asc" } });
    expect(ledger.map((l) => [l.reason, l.amount])).toEqual([["run_reservation", -1], ["run_refund", 1]]);
    expect(run.startedAt).toBeNull();
    expect((await busy.result).events.at(-1)!.data.type).toBe("run_completed");
  });

  it("answers 404, not 500, when the task is deleted while its run is being cancelled", async () => {
    // A queued run of no job: no worker claims it.
    const taskId = newId("task");
    const runId = newId("run");
    await prisma.task.create({ data: { id: taskId, orgId: tenant.orgId, agentId: tenant.agentId, title: "t", activeRunId: runId, runCount: 1 } });
    const started = { seq: 1, type: "run_started", run_id: runId, task_id: taskId };
    await prisma.run.create({
      data: { id: runId, taskId, orgId: tenant.orgId, agentId: tenant.agentId, query: "q", status: "queued", lastSeq: 1, creditsReserved: 0, events: { create: { firstSeq: 1, lastSeq: 1, events: [started] } } },
    });
    // The deletion holds the run's row while the cancel, past its ownership check, waits for it.
    const deleter = new pg.Client({ connectionString: testEnv().databaseUrl });
    await deleter.connect();
    try {
      const deleterPid = (await deleter.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      await deleter.query("BEGIN");
      await deleter.query("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", [runId]);
      const cancelling = post(`/tasks/${taskId}/runs/${runId}/cancel`);
      // The cancel's end waiting for the deleter (read outside the deleter's transaction, whose
      // view of pg_stat_activity stays as first read).
      await eventually(async () => {
        const [waiting] = await prisma.$queryRaw<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${deleterPid}::int = ANY(pg_blocking_pids(pid)) AND query LIKE '%agentrun_finish_run%'`;
        return (waiting?.n ?? 0) > 0;
      });
      await deleter.query("DELETE FROM tasks WHERE id = $1", [taskId]);
      await deleter.query("COMMIT");
      expect(await cancelling).toMatchObject({ status: 404, body: { error: { code: "run_not_found" } } });
    } finally {
      await deleter.end();
    }
  });
});

describe("one run at a time per task", () => {
  it("decides two simultaneous runs on one task atomically: one starts, one gets 409", async () => {
    const { body } = await post("/tasks", { title: "race" });
    // Each run takes a second, so the one that starts is still running when the other is decided
    // however late a loaded machine gets to it.
    const results = await Promise.all([post("/run", { query: "[sleep:1000] a", task_id: body.task_id, stream: false }), post("/run", { query: "[sleep:1000] b", task_id: body.task_id, stream: false })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(results.find((r) => r.status === 409)!.body.error.code).toBe("run_in_progress");
    expect(await prisma.run.count({ where: { taskId: body.task_id } })).toBe(1);
    expect((await prisma.task.findUniqueOrThrow({ where: { id: body.task_id } })).runCount).toBe(1);
  });
});

describe("Idempotency-Key", () => {
  it("returns the same run for the same key and body, also when streamed, and 409 for another body", async () => {
    const key = `key-${newId("run")}`;
    const first = await post("/run", { query: "only once", stream: false }, { "idempotency-key": key });
    const second = await post("/run", { query: "only once", stream: false }, { "idempotency-key": key });
    expect(first.status).toBe(200);
    expect(second.body.run_id).toBe(first.body.run_id);
    expect(second.body.output).toBe("Echo: only once");
    const streamed = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "only once" }, headers: { ...tenant.headers, "idempotency-key": key } });
    expect(streamed.events[0]!.data.run_id).toBe(first.body.run_id);
    expect(streamed.events.map((e) => Number(e.id))).toEqual(streamed.events.map((_, i) => i + 1));
    expect(streamed.events.at(-1)!.data.type).toBe("run_completed");
    expect(await prisma.run.count({ where: { taskId: first.body.task_id } })).toBe(1);
    const other = await post("/run", { query: "something else", stream: false }, { "idempotency-key": key });
    expect(other).toMatchObject({ status: 409, body: { error: { code: "idempotency_conflict" } } });
    expect((await post("/run", { query: "x" }, { "idempotency-key": "has space" })).status).toBe(400);
  });

  it("starts one run for concurrent requests with the same new key", async () => {
    const key = `key-${newId("run")}`;
    const results = await Promise.all(Array.from({ length: 5 }, () => post("/run", { query: "together", stream: false }, { "idempotency-key": key })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(results.map((r) => r.body.run_id)).size).toBe(1);
    expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: "together" } })).toBe(1);
  });
});

describe("list query plan", () => {
  it("lists 10,000 tasks of an agent on an index, never a sequential scan", async () => {
    const t = await createTenant(prisma);
    const others = await createTenant(prisma);
    // The agent's 10,000 tasks among 40,000 of another agent, as in a shared deployment.
    const bulk = (agent: Tenant, n: number) =>
      prisma.$executeRawUnsafe(
        `INSERT INTO tasks (id, org_id, agent_id, title, status, run_count, credits_used, created_at, updated_at)
         SELECT 'task_bulk_' || '${agent.agentId}_' || i, '${agent.orgId}', '${agent.agentId}', 'bulk ' || i,
                (ARRAY['pending','running','completed','failed']::"TaskStatus"[])[1 + i % 4], 0, 0,
                now() - (i || ' seconds')::interval, now()
         FROM generate_series(1, ${n}) AS i`,
      );
    await bulk(t, 10_000);
    await bulk(others, 40_000);
    await prisma.$executeRawUnsafe("ANALYZE tasks");
    await prisma.$executeRawUnsafe("ANALYZE task_counts");
    const res = await fetch(`${stack.gatewayUrl}/api/tasks?limit=20`, { headers: t.headers });
    const body = (await res.json()) as any;
    expect(body.total).toBe(10_000);
    const completed = (await (await fetch(`${stack.gatewayUrl}/api/tasks?status=completed`, { headers: t.headers })).json()) as any;
    expect(completed.total).toBe(await prisma.task.count({ where: { agentId: t.agentId, status: "completed" } }));
    expect(body.tasks[0].title).toBe("bulk 1");
    // The statements the gateway runs: the big table is read through its indexes only.
    type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Name"?: string; Plans?: PlanNode[] };
    const scans = (n: PlanNode): PlanNode[] => [...(n["Relation Name"] ? [n] : []), ...(n.Plans ?? []).flatMap(scans)];
    const plans: string[] = [];
    for (const status of [undefined, "completed" as const]) {
      const sql = taskListSql(t, { limit: 20, offset: 0, status });
      const [row] = await prisma.$queryRawUnsafe<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>(`EXPLAIN (FORMAT JSON) ${sql.text}`, ...sql.values);
      const onTasks = scans(row!["QUERY PLAN"][0].Plan).filter((n) => n["Relation Name"] === "tasks");
      expect(onTasks.length).toBeGreaterThan(0);
      for (const n of onTasks) expect(n["Node Type"]).toMatch(/Index/);
      plans.push(onTasks.map((n) => n["Index Name"]).join(","));
    }
    expect(plans[0]).toContain("tasks_agent_id_created_at_id_idx");
    expect(plans[1]).toContain("tasks_agent_id_status_created_at_id_idx");
  });

  it("keeps the per-status totals exact through bulk inserts, updates and deletes of many tasks in one statement", async () => {
    const t = await createTenant(prisma);
    await prisma.$executeRawUnsafe(
      `INSERT INTO tasks (id, org_id, agent_id, title, status, run_count, credits_used, created_at, updated_at)
       SELECT 'task_mass_' || '${t.agentId}_' || i, '${t.orgId}', '${t.agentId}', 'mass ' || i,
              (ARRAY['pending','running','completed','failed']::"TaskStatus"[])[1 + i % 4], 0, 0, now(), now()
       FROM generate_series(1, 20000) AS i`,
    );
    await prisma.$executeRawUnsafe(`UPDATE tasks SET status = 'completed' WHERE agent_id = '${t.agentId}' AND status = 'running'`);
    await prisma.$executeRawUnsafe(`UPDATE tasks SET title = 'renamed' WHERE agent_id = '${t.agentId}' AND status = 'pending'`);
    await prisma.$executeRawUnsafe(`DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE agent_id = '${t.agentId}' AND status = 'failed' LIMIT 1234)`);
    const expected = { pending: 5000, running: 0, completed: 10000, failed: 5000 - 1234 };
    for (const [status, n] of Object.entries(expected)) {
      expect(await prisma.task.count({ where: { agentId: t.agentId, status: status as keyof typeof expected } })).toBe(n);
      const page = (await (await fetch(`${stack.gatewayUrl}/api/tasks?status=${status}&limit=1`, { headers: t.headers })).json()) as any;
      expect(page.total).toBe(n);
    }
    const all = (await (await fetch(`${stack.gatewayUrl}/api/tasks?limit=1`, { headers: t.headers })).json()) as any;
    expect(all.total).toBe(20000 - 1234);
  });
});
