import type { PrismaClient } from "@agentrun/db";
import { createRunQueue, enqueueRun } from "@agentrun/queue";
import { createTestRun, eventually, freePort, startPrivateRedis, startService, testEnv, testPrisma, waitForOk, type PrivateRedis, type ServiceProcess } from "@agentrun/testing";
import { Redis } from "ioredis";
import { SHUTDOWN_MARGIN_MS } from "../src/agent-worker";

jest.setTimeout(60_000);

// The worker runs on a Redis server of its own, which these tests stop under it.
let redis: PrivateRedis;
let model: ServiceProcess;
let modelUrl: string;
let prisma: PrismaClient;
const workers: ServiceProcess[] = [];

beforeAll(async () => {
  redis = await startPrivateRedis();
  const port = await freePort();
  model = startService("scripted-model", { SCRIPTED_MODEL_PORT: String(port) });
  modelUrl = `http://127.0.0.1:${port}`;
  await waitForOk(`${modelUrl}/health`, model);
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await Promise.all([...workers, model].map((p) => p?.kill()));
  await redis?.stop();
  await prisma?.$disconnect();
});

const GRACE_MS = 1000;
/** The worker's own bound on shutdown, plus 3 s for the process to exit on a loaded machine. */
const EXIT_BOUND_MS = GRACE_MS + SHUTDOWN_MARGIN_MS + 3000;

/** Starts a worker on the private Redis and waits for its first heartbeat. */
async function startWorker(): Promise<ServiceProcess & { prefix: string }> {
  const prefix = `${testEnv().redisPrefix}:shutdown-${await freePort()}`;
  const worker = startService("agent-worker", {
    WORKER_ID: "worker-shutdown",
    DATABASE_URL: testEnv().databaseUrl,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    SCRIPTED_MODEL_URL: `${modelUrl}/v1`,
    SHUTDOWN_GRACE_MS: String(GRACE_MS),
    LOG_LEVEL: "info",
  });
  workers.push(worker);
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  try {
    for (let i = 0; !(await client.zscore(`${prefix}:workers`, "worker-shutdown")); i++) {
      if (worker.child.exitCode !== null) throw new Error(`worker exited:\n${worker.output()}`);
      if (i === 300) throw new Error(`the worker set no heartbeat in 30 s:\n${worker.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.disconnect();
  }
  return Object.assign(worker, { prefix });
}

/** Resolves with the exit code and how long the worker took after SIGTERM, or null if it was still running after `ms`. */
async function sigtermAndWait(worker: ServiceProcess, ms: number, meanwhile?: () => Promise<void>): Promise<{ code: number | null; tookMs: number } | null> {
  const exited = new Promise<number | null>((r) => worker.child.once("exit", (code) => r(code)));
  const t0 = Date.now();
  worker.child.kill("SIGTERM");
  await meanwhile?.();
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([exited, new Promise<"running">((r) => (timer = setTimeout(() => r("running"), ms - (Date.now() - t0))))]);
  clearTimeout(timer);
  return code === "running" ? null : { code, tookMs: Date.now() - t0 };
}

/** The worker's JSON log lines. */
const logLines = (worker: ServiceProcess) =>
  worker
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/**
 * Checks an exit whose code may go either way, within the bound: 0 when everything closed, 1
 * when something waited for Redis past the grace; the log says which.
 */
function expectExitSaidSo(worker: ServiceProcess, res: { code: number | null; tookMs: number } | null): void {
  expect(res).not.toBeNull();
  expect(res!.tookMs).toBeLessThan(EXIT_BOUND_MS);
  const messages = logLines(worker).map((l) => l.msg);
  if (res!.code === 0) expect(messages).toContain("agent worker stopped");
  else {
    expect(res!.code).toBe(1);
    expect(messages).toContain("shutdown timed out: not everything closed");
  }
}

it("exits 1 within SHUTDOWN_GRACE_MS plus the margin when SIGTERM arrives during a Redis outage with a run in progress, says what did not close, and stores the run's end", async () => {
  const worker = await startWorker();
  // A run whose model never answers: still in progress when Redis goes away.
  const runId = await createTestRun(prisma, "queued");
  await prisma.run.update({ where: { id: runId }, data: { query: "[hang] until the worker stops" } });
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const queue = createRunQueue({ connection, redisPrefix: worker.prefix });
  try {
    await enqueueRun(queue, { runId });
  } finally {
    await queue.close();
    connection.disconnect();
  }
  await eventually(async () => (await prisma.run.findUnique({ where: { id: runId } }))?.status === "running");
  await redis.stop();
  try {
    const res = await sigtermAndWait(worker, 15_000);
    expect(res).not.toBeNull();
    // BullMQ cannot record the job's end without Redis, so its worker cannot close.
    expect(res!.code).toBe(1);
    expect(res!.tookMs).toBeLessThan(EXIT_BOUND_MS);
    const line = logLines(worker).find((l) => l.msg === "shutdown timed out: not everything closed");
    expect(line).toMatchObject({ level: 50, notClosed: expect.arrayContaining(["BullMQ worker"]) });
    // The run was stopped at the grace and its end stored: PostgreSQL was up.
    expect(await prisma.run.findUnique({ where: { id: runId }, select: { status: true, errorCode: true } })).toEqual({ status: "failed", errorCode: "worker_shutdown" });
  } finally {
    await redis.start();
  }
});

it("exits within the bound when SIGTERM arrives during a Redis outage with nothing in progress, and says how it ended", async () => {
  const worker = await startWorker();
  await redis.stop();
  try {
    // Whether BullMQ's connections close at once or wait for Redis depends on whether they had
    // noticed the outage yet; either way the worker exits in time and says which it was.
    expectExitSaidSo(worker, await sigtermAndWait(worker, 15_000));
  } finally {
    await redis.start();
  }
});

it("still exits within the bound when Redis comes back while it shuts down", async () => {
  const worker = await startWorker();
  await redis.stop();
  const res = await sigtermAndWait(worker, 15_000, async () => {
    await new Promise((r) => setTimeout(r, 1500));
    await redis.start();
  });
  // Whether everything closed depends on how soon the connections come back; either way it says so.
  expectExitSaidSo(worker, res);
});

it("exits 0 on SIGTERM when Redis is up", async () => {
  const worker = await startWorker();
  const res = await sigtermAndWait(worker, 15_000);
  expect(res).toEqual({ code: 0, tookMs: expect.any(Number) });
  expect(logLines(worker).map((l) => l.msg)).toContain("agent worker stopped");
});
