import { readDbEvents } from "@agentrun/events";
import { createTenant, eventually, readSse, runJson, startPrivatePostgres, startPrivateRedis, startStack, testPrisma, type PrivatePostgres, type PrivateRedis, type Stack, type Tenant } from "@agentrun/testing";
import { spawnSync } from "node:child_process";
import { ensureDatabase, migrateDeploy, newId, type PrismaClient } from "@agentrun/db";

jest.setTimeout(120_000);

// A run the queue cannot take (Redis went down, or stopped answering, after the request passed
// the rate limit) ends one way for everyone: failed and refunded with its Idempotency-Key freed,
// or, when it cannot be failed either (PostgreSQL down as well), accepted with its key kept, and
// executed once later.
// The stack runs on a PostgreSQL cluster and a Redis server of its own, which these tests stop.
let pg: PrivatePostgres;
let redis: PrivateRedis;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
const QUEUED_STALE_AFTER_MS = 3000;

beforeAll(async () => {
  // Each assigned as soon as it runs, so that afterAll stops it whatever failed beside it.
  await Promise.all([startPrivatePostgres().then((p) => (pg = p)), startPrivateRedis().then((r) => (redis = r))]);
  await ensureDatabase(pg.url);
  await migrateDeploy(pg.url);
  stack = await startStack({ memory: false, env: { DATABASE_URL: pg.url, REDIS_URL: redis.url }, workerEnv: { QUEUED_STALE_AFTER_MS: String(QUEUED_STALE_AFTER_MS) } });
  prisma = testPrisma(pg.url);
  tenant = await createTenant(prisma);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
  await redis?.stop();
  await pg?.destroy();
});

const keyed = (key: string) => ({ ...tenant.headers, "idempotency-key": key });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const balance = async () => (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;

/** Sends a command to the stack's Redis with redis-cli. */
function redisCli(...args: string[]): void {
  const r = spawnSync("redis-cli", ["-p", String(redis.port), ...args], { encoding: "utf8" });
  if (r.status !== 0 || !r.stdout.includes("OK")) throw new Error(`redis-cli ${args.join(" ")}: ${r.stderr || r.stdout}`);
}

/** A task with one finished run, free for the next. */
async function newTask(): Promise<string> {
  // The gateway may still be reconnecting to a Redis that was just started again.
  const first = await eventually(async () => {
    const r = await runJson(stack.gatewayUrl, tenant.headers, { query: "first" });
    return r.status === 200 && r.body;
  });
  expect(first.status).toBe("completed");
  return first.task_id;
}

/**
 * Sends a JSON run on `taskId` while the task's row is locked, so that the request has passed
 * authentication and the rate limit and waits inside createRun; runs `whileHeld` (e.g. stops
 * Redis) before letting it go on. Returns the request's answer, still on its way.
 */
async function runHeldAtCreate(taskId: string, key: string, query: string, whileHeld: () => Promise<void>): Promise<{ answer: ReturnType<typeof runJson> }> {
  return sendHeldAtCreate(taskId, () => runJson(stack.gatewayUrl, keyed(key), { query, task_id: taskId }, 60_000), whileHeld);
}

/** {@link runHeldAtCreate} for any request on `taskId` that `send` makes. */
async function sendHeldAtCreate<T>(taskId: string, send: () => Promise<T>, whileHeld: () => Promise<void>): Promise<{ answer: Promise<T> }> {
  let answer!: Promise<T>;
  await prisma.$transaction(
    async (tx) => {
      await tx.$queryRaw`SELECT id FROM tasks WHERE id = ${taskId} FOR UPDATE`;
      answer = send();
      await eventually(
        async () => {
          const [row] = await prisma.$queryRaw<{ n: number }[]>`
            SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%agentrun_create_run%'`;
          return row!.n > 0;
        },
        { intervalMs: 50, timeoutMs: 10_000 },
      );
      await whileHeld();
    },
    { timeout: 30_000 },
  );
  return { answer };
}

it("fails the run while Redis is down: 503, stored failed and refunded, the key freed, and it never executes", async () => {
  const taskId = await newTask();
  const before = await balance();
  const key = `key-${newId("run")}`;
  const res = await (await runHeldAtCreate(taskId, key, "unqueued", () => redis.stop())).answer;
  await redis.start();
  expect(res.status).toBe(503);
  expect(res.body.error.code).toBe("unavailable");
  const run = await prisma.run.findFirstOrThrow({ where: { taskId, query: "unqueued" } });
  expect(run).toMatchObject({ status: "failed", errorCode: "unavailable", creditsUsed: 0, workerId: null });
  expect(res.body.error.details).toEqual({ run_id: run.id, task_id: taskId });
  expect(await prisma.idempotencyKey.count({ where: { orgId: tenant.orgId, key } })).toBe(0);
  expect(await balance()).toBe(before);

  // Past the workers' look for queued runs without a job: there is none to revive.
  await sleep(2 * QUEUED_STALE_AFTER_MS);
  expect(await prisma.run.findUniqueOrThrow({ where: { id: run.id } })).toMatchObject({ status: "failed", workerId: null, startedAt: null });

  // The key is free: the client's retry starts a run of its own.
  const retry = await eventually(async () => {
    const r = await runJson(stack.gatewayUrl, keyed(key), { query: "unqueued", task_id: taskId });
    return r.status === 200 && r.body;
  });
  expect(retry).toMatchObject({ status: "completed", output: "Echo: unqueued" });
  expect(retry.run_id).not.toBe(run.id);
});

it("accepts a run it can neither queue nor fail: 202 queued, the key kept, and the run executes once when the outage ends", async () => {
  const taskId = await newTask();
  const before = await balance();
  const key = `key-${newId("run")}`;
  // Redis stops answering writes: the queue's add waits, and the gateway gives up on it after 2 s.
  const { answer } = await runHeldAtCreate(taskId, key, "held", async () => redisCli("CLIENT", "PAUSE", "20000", "WRITE"));
  // The run is recorded; PostgreSQL goes down before the queue gives up.
  const { id: runId } = await eventually(() => prisma.run.findFirst({ where: { taskId, query: "held" }, select: { id: true } }), { intervalMs: 20 });
  await pg.stop();
  const res = await answer;
  await pg.start();
  redisCli("CLIENT", "UNPAUSE");
  expect(res.status).toBe(202);
  expect(res.body).toEqual({ run_id: runId, task_id: taskId, status: "queued" });

  // It runs once the outage is over: from its queue entry, which Redis took when it answered
  // writes again, or queued again by the workers.
  const run = await eventually(async () => {
    const r = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return r.status !== "queued" && r.status !== "running" && r;
  }, { timeoutMs: 60_000 });
  expect(run).toMatchObject({ status: "completed", output: "Echo: held" });
  expect(await prisma.idempotencyKey.findUniqueOrThrow({ where: { orgId_key: { orgId: tenant.orgId, key } } })).toMatchObject({ runId });
  // A retry with the key gets that run, not a second one.
  const replay = await eventually(async () => {
    const r = await runJson(stack.gatewayUrl, keyed(key), { query: "held", task_id: taskId });
    return r.status === 200 && r.body;
  });
  expect(replay).toMatchObject({ run_id: runId, status: "completed" });
  expect(await prisma.run.count({ where: { taskId, query: "held" } })).toBe(1);
  // Charged once, for that run.
  expect(run.creditsUsed).toBeGreaterThan(0);
  expect(await balance()).toBe(before - run.creditsUsed);
});

it("streams a run it can neither queue nor fail to its end once the outage is over", async () => {
  const taskId = await newTask();
  const key = `key-${newId("run")}`;
  const send = () => readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "held on a stream", task_id: taskId }, headers: keyed(key), timeoutMs: 90_000 });
  const { answer } = await sendHeldAtCreate(taskId, send, async () => redisCli("CLIENT", "PAUSE", "20000", "WRITE"));
  const { id: runId } = await eventually(() => prisma.run.findFirst({ where: { taskId, query: "held on a stream" }, select: { id: true } }), { intervalMs: 20 });
  await pg.stop();
  // The queue gives up on the add after 2 s, and failing the run fails too (PostgreSQL is down).
  await sleep(4000);
  await pg.start();
  redisCli("CLIENT", "UNPAUSE");
  const { status, events } = await answer;
  expect(status).toBe(200);
  expect(events[0]!.data).toMatchObject({ type: "run_started", run_id: runId });
  expect(events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id: runId });
  expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
  expect(events.flatMap((e) => (e.data.type === "text_chunk" ? [e.data.content] : [])).join("")).toBe("Echo: held on a stream");
  // Stored as streamed, and the run ended as its stream says.
  expect(await readDbEvents({ prisma }, runId)).toEqual(events.map((e) => e.data));
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true } })).toEqual({ status: "completed" });
});
