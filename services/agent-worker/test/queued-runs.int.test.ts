import { stackWithTenant, eventually, type Stack, type Tenant } from "@agentrun/testing";
import { newId, type PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";
import { AGENT_RUN_JOB, createRunQueue } from "@agentrun/queue";
import { Redis } from "ioredis";

// The workers' sweeps. Queued runs whose BullMQ job was lost (e.g. Redis lost its data): the
// sweeper queues a recent one again, and ends one that is too old to start now; a worker ends one
// too old to start now that its job brings. Expired Idempotency-Keys are deleted.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, workerEnv: { QUEUED_STALE_AFTER_MS: "1000", QUEUED_MAX_AGE_MS: "600000" } } });

/** Records a queued run the way the gateway does, but never puts it on the queue; `ageMs` backdates it. */
async function queuedRunWithoutJob(query: string, ageMs: number): Promise<string> {
  const runId = newId("run");
  const taskId = newId("task");
  const started = JSON.stringify({ seq: 1, type: "run_started", run_id: runId, task_id: taskId });
  await prisma.$queryRaw`SELECT agentrun_create_run(${runId}, ${taskId}, true, ${tenant.orgId}, ${tenant.agentId}, ${query}, ${query},
    null, null::jsonb, null::jsonb, null, 1, ${newId("led")}, ${started}::jsonb)`;
  await prisma.$executeRaw`UPDATE runs SET created_at = now() - make_interval(secs => ${ageMs / 1000}) WHERE id = ${runId}`;
  return runId;
}

it("queues a recent queued run again when its job is missing, and it completes", async () => {
  const runId = await queuedRunWithoutJob("[chunks:3] lost job", 2000);
  const run = await eventually(async () => {
    const r = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return r.status === "completed" && r;
  });
  expect(run.output.length).toBeGreaterThan(0);
  expect(run.workerId).toMatch(/^worker-/);
}, 30_000);

it("ends a queued run older than QUEUED_MAX_AGE_MS as failed (unavailable) instead of running it, and refunds it", async () => {
  const before = (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;
  const runId = await queuedRunWithoutJob("[chunks:3] hours late", 2 * 3600_000);
  const run = await eventually(async () => {
    const r = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return r.status !== "queued" && r;
  });
  expect(run).toMatchObject({ status: "failed", errorCode: "unavailable", output: "", startedAt: null, workerId: null });
  const events = await readDbEvents({ prisma }, runId);
  expect(events.map((e) => e.type)).toEqual(["run_started", "run_failed"]);
  const task = await prisma.task.findUniqueOrThrow({ where: { id: run.taskId } });
  expect(task).toMatchObject({ status: "failed", activeRunId: null });
  // The reservation taken when the run was recorded came back: nothing was consumed.
  expect((await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance).toBe(before);
}, 30_000);

it("ends a queued run that waited longer than QUEUED_MAX_AGE_MS for a worker as failed (unavailable) when its job reaches one, instead of running it", async () => {
  const before = (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;
  // No worker for two hours: the run and its job wait.
  await Promise.all(stack.workers.map((w) => w.stop()));
  const runId = await queuedRunWithoutJob("[chunks:3] waited for a worker", 2 * 3600_000);
  const connection = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const queue = createRunQueue({ connection, redisPrefix: stack.env.REDIS_PREFIX! });
  try {
    await queue.add(AGENT_RUN_JOB, { runId }, { jobId: runId, timestamp: Date.now() - 2 * 3600_000 });
  } finally {
    await queue.close();
    connection.disconnect();
  }
  // A worker starts: its sweep leaves the run to its job (which it still has), which it takes.
  await stack.addWorker();
  const run = await eventually(async () => {
    const r = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return r.status !== "queued" && r;
  });
  expect(run).toMatchObject({ status: "failed", errorCode: "unavailable", output: "", startedAt: null, workerId: null });
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.type)).toEqual(["run_started", "run_failed"]);
  expect((await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance).toBe(before);
}, 30_000);

it("ends a queued run that waited longer than 2^31 ms (a stack stopped for a month), its duration at the column's maximum", async () => {
  const runId = await queuedRunWithoutJob("[chunks:3] a month late", 30 * 24 * 3600_000);
  const run = await eventually(async () => {
    const r = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return r.status !== "queued" && r;
  });
  expect(run).toMatchObject({ status: "failed", errorCode: "unavailable", durationMs: 2147483647 });
  const events = await readDbEvents({ prisma }, runId);
  expect(events.map((e) => e.type)).toEqual(["run_started", "run_failed"]);
}, 30_000);

it("deletes Idempotency-Keys whose day has passed, and keeps the others", async () => {
  const key = (name: string, expiresAt: Date) => ({ orgId: tenant.orgId, key: `${name}-${newId("run")}`, requestHash: "h", runId: newId("run"), taskId: newId("task"), expiresAt });
  const expired = [key("expired-1", new Date(Date.now() - 60_000)), key("expired-2", new Date(Date.now() - 1))];
  const live = key("live", new Date(Date.now() + 3600_000));
  await prisma.idempotencyKey.createMany({ data: [...expired, live] });
  const left = (k: { key: string }) => prisma.idempotencyKey.count({ where: { orgId: tenant.orgId, key: k.key } });
  await eventually(async () => (await left(expired[0]!)) + (await left(expired[1]!)) === 0);
  expect(await left(live)).toBe(1);
}, 30_000);
