import type Redis from "ioredis";
import { randomUUID } from "node:crypto";
import { apiJson, eventually, readSse, runJson, stackWithTenant, watchSse, type SseResponse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { runCancelKey, runHeartbeatKey, runLogKey, runWriterKey } from "@agentrun/events";

// DELETE /api/tasks/{id} racing the requests that read the task's runs. No worker: every run
// stays queued until the delete cancels it, which ends it at once and lets the delete go on, so
// the reads meet the delete within milliseconds of each other.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let redis: Redis;

stackWithTenant((started) => ({ stack, prisma, tenant, redis } = started as typeof started & { redis: Redis }), { stack: { workers: 0 }, tenant: { plan: "enterprise", rpmLimit: 100_000 }, redis: true });

const ROUNDS = 20;

/** A task with one queued run, and the JSON request still waiting for that run. */
async function waitingRun(): Promise<{ taskId: string; answer: Promise<{ status: number; body: any }> }> {
  const answer = runJson(stack.gatewayUrl, tenant.headers, { query: "never picked up", stream: false });
  const run = await eventually(async () => {
    const found = await prisma.run.findFirst({ where: { orgId: tenant.orgId, status: "queued", query: "never picked up" }, orderBy: { createdAt: "desc" } });
    if (!found || (await prisma.run.count({ where: { orgId: tenant.orgId, status: "queued" } })) !== 1) throw new Error("not queued yet");
    return found;
  }, { intervalMs: 20 });
  return { taskId: run.taskId, answer };
}

it("answers a JSON run whose task is deleted meanwhile with the cancelled run or 404 task_not_found, never run_not_found", async () => {
  const outcomes: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { taskId, answer } = await waitingRun();
    expect((await apiJson(stack.gatewayUrl, "DELETE", `/tasks/${taskId}`, tenant.headers)).status).toBe(204);
    const { status, body } = await answer;
    if (status === 200) expect(body).toMatchObject({ task_id: taskId, status: "cancelled" });
    else expect(body.error.message).toMatch(/^Task '.+' was deleted while its run '.+' was in progress; the run was cancelled\.$/);
    outcomes.push(status === 200 ? "200 cancelled" : `${status} ${body.error.code}`);
  }
  expect(outcomes.filter((o) => o !== "200 cancelled" && o !== "404 task_not_found")).toEqual([]);
});

it("answers GET /tasks/{id}/runs for a task deleted meanwhile with its runs or 404, never an empty list", async () => {
  const outcomes: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { taskId, answer } = await waitingRun();
    const reads = Array.from({ length: 6 }, (_, n) =>
      new Promise((r) => setTimeout(r, n * 2)).then(() => apiJson(stack.gatewayUrl, "GET", `/tasks/${taskId}/runs`, tenant.headers)),
    );
    const deleted = apiJson(stack.gatewayUrl, "DELETE", `/tasks/${taskId}`, tenant.headers);
    for (const { status, body } of await Promise.all(reads)) outcomes.push(status === 200 ? `200 with ${body.runs.length} run(s)` : `${status} ${body.error.code}`);
    expect((await deleted).status).toBe(204);
    await answer;
  }
  expect(outcomes.filter((o) => o !== "200 with 1 run(s)" && o !== "404 task_not_found")).toEqual([]);
});

it("answers GET /tasks/{id}/runs?after= for a task deleted meanwhile with its runs or 404, never 400 for the cursor", async () => {
  const outcomes: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { body: task } = await apiJson(stack.gatewayUrl, "POST", "/tasks", tenant.headers, { title: "paged as it goes" });
    const ids = [`run_paged_${i}_a`, `run_paged_${i}_b`];
    await prisma.$executeRawUnsafe(
      `INSERT INTO runs (id, task_id, org_id, agent_id, status, query, output, created_at)
       SELECT id, $1, $2, $3, 'completed', 'q', 'a', now() + n * interval '1 millisecond' FROM unnest($4::text[]) WITH ORDINALITY AS t(id, n)`,
      task.task_id, tenant.orgId, tenant.agentId, ids,
    );
    const reads = Array.from({ length: 8 }, (_, n) =>
      new Promise((r) => setTimeout(r, n)).then(() => apiJson(stack.gatewayUrl, "GET", `/tasks/${task.task_id}/runs?after=${ids[0]}`, tenant.headers)),
    );
    const deleted = apiJson(stack.gatewayUrl, "DELETE", `/tasks/${task.task_id}`, tenant.headers);
    for (const { status, body } of await Promise.all(reads)) outcomes.push(status === 200 ? `200 with ${body.runs.length} run(s)` : `${status} ${body.error.code}`);
    expect((await deleted).status).toBe(204);
  }
  expect(outcomes.filter((o) => o !== "200 with 1 run(s)" && o !== "404 task_not_found")).toEqual([]);
});

it("ends a stream and a JSON wait whose run vanished with its task after they began following it", async () => {
  // What a delete leaves when it cancels the run, deletes its events and unlinks its log between
  // a reader's look-up of the run and its first read: both stores empty, the run's row gone.
  const streamed = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "followed as it vanishes" }, headers: tenant.headers, timeoutMs: 30_000 });
  await streamed.waitFor((e) => e.type === "run_started");
  const { run_id: runId, task_id: taskId } = streamed.events[0];
  const answer = runJson(stack.gatewayUrl, tenant.headers, { query: "waited for as it vanishes", stream: false });
  const waited = await eventually(() => prisma.run.findFirst({ where: { orgId: tenant.orgId, query: "waited for as it vanishes" } }), { intervalMs: 20 });
  for (const id of [runId, waited.id]) await redis.del(runLogKey(stack.env.REDIS_PREFIX!, id));
  await prisma.task.deleteMany({ where: { id: { in: [taskId, waited.taskId] } } });
  // The stream ends without a terminal event (the signal to re-attach), and re-attaching tells
  // why; the JSON wait answers 404.
  const { events } = await streamed.result;
  expect(events.map((e) => e.data.type)).toEqual(["run_started"]);
  const reattached = await apiJson(stack.gatewayUrl, "GET", `/tasks/${taskId}/runs/${runId}/events`, tenant.headers);
  expect([reattached.status, reattached.body.error.code]).toEqual([404, "task_not_found"]);
  const { status, body } = await answer;
  expect([status, body.error.code]).toEqual([404, "task_not_found"]);
}, 40_000);

/** A read's outcome: its status, and a stream's seqs and types (`new run` for a run its key started anew). */
function outcome(r: SseResponse, runId: string): string {
  if (r.status !== 200) return `${r.status} ${r.body?.error?.code ?? ""}`.trim();
  if (r.events[0]?.data.run_id !== runId) return "200 new run";
  return `200 ${r.events.map((e) => `${e.id}:${e.data.type}`).join(" ")}`;
}

it("answers the event streams and SSE replays of a run whose task is deleted meanwhile from run_started to run_cancelled, or 404: never from seq 2, empty or 204", async () => {
  // The delete cancels the queued run (run_cancelled, seq 2, goes to both stores), then deletes
  // the task's rows (run_started, seq 1, with them) and then the run's Redis log: reads that look
  // the run up before the rows go and read its events after meet that window.
  const outcomes: string[] = [];
  const started = Date.now();
  for (let i = 0; i < 40 && Date.now() - started < 12_000; i++) {
    const body = { query: "read as its task goes" };
    const headers = { ...tenant.headers, "idempotency-key": `read-deleted-${randomUUID()}` };
    const first = watchSse(`${stack.gatewayUrl}/api/run`, { body, headers });
    await first.waitFor((e) => e.type === "run_started");
    const { run_id: runId, task_id: taskId } = first.events[0];
    const url = `${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/events`;
    // A replay that finds its key freed starts a run of its own: read up to its run_started.
    const reads = Array.from({ length: 12 }, (_, n) =>
      new Promise((r) => setTimeout(r, n)).then(() =>
        n % 2 ? readSse(url, { headers: tenant.headers }) : readSse(`${stack.gatewayUrl}/api/run`, { body, headers, until: (e) => e.data.run_id !== runId }),
      ),
    );
    expect((await apiJson(stack.gatewayUrl, "DELETE", `/tasks/${taskId}`, tenant.headers)).status).toBe(204);
    for (const r of await Promise.all(reads)) {
      outcomes.push(outcome(r, runId));
      if (r.events[0] && r.events[0].data.run_id !== runId) await apiJson(stack.gatewayUrl, "DELETE", `/tasks/${r.events[0].data.task_id}`, tenant.headers);
    }
    await first.result;
  }
  // run_not_found: the task looked up, and its run looked up after the delete.
  const allowed = ["200 1:run_started 2:run_cancelled", "404 task_not_found", "404 run_not_found", "200 new run"];
  expect(outcomes.filter((o) => !allowed.includes(o))).toEqual([]);
}, 30_000);

it("deletes a task holding 100,000 runs: 204, the logs and heartbeats of its runs removed, the gateway still serving", async () => {
  const created = await apiJson(stack.gatewayUrl, "POST", "/tasks", tenant.headers, { title: "a long history" });
  const taskId: string = created.body.task_id;
  const n = 100_000;
  await prisma.$executeRawUnsafe(
    `INSERT INTO runs (id, task_id, org_id, agent_id, status, query, output, created_at)
     SELECT 'run_hist' || g, $1, $2, $3, 'completed', 'question ' || g, 'answer ' || g, now() FROM generate_series(1, ${n}) g`,
    taskId, tenant.orgId, tenant.agentId,
  );
  // Recently ended runs still have their Redis logs: the first, one in the middle, the last.
  const prefix = stack.env.REDIS_PREFIX!;
  const logged = ["run_hist1", "run_hist50000", `run_hist${n}`].map((id) => runLogKey(prefix, id));
  for (const key of logged) await redis.rpush(key, JSON.stringify({ seq: 1, type: "run_started" }));
  // The last one was ended by a forced cancel as it was deleted: its heartbeat goes, while its
  // cancel flag and writer key stay, to keep out its worker should it come back to Redis.
  const last = `run_hist${n}`;
  const kept = [runCancelKey(prefix, last), runWriterKey(prefix, last)];
  for (const key of [...kept, runHeartbeatKey(prefix, last)]) await redis.set(key, "1", "EX", 3600);

  const deleted = await apiJson(stack.gatewayUrl, "DELETE", `/tasks/${taskId}`, tenant.headers);
  expect(deleted.status).toBe(204);
  expect(await redis.exists(...logged, runHeartbeatKey(prefix, last))).toBe(0);
  expect(await redis.exists(...kept)).toBe(2);
  expect(await prisma.run.count({ where: { taskId } })).toBe(0);
  // The gateway goes on serving (a single UNLINK of every key crashed it a tick later).
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(stack.gateway.child.exitCode).toBeNull();
  expect((await apiJson(stack.gatewayUrl, "GET", `/tasks/${taskId}`, tenant.headers)).status).toBe(404);
}, 60_000);
