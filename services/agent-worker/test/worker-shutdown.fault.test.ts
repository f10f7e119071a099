import { freePort, startPrivateRedis, startService, testEnv, type PrivateRedis, type ServiceProcess } from "@agentrun/testing";
import { Redis } from "ioredis";

jest.setTimeout(60_000);

// The worker runs on a Redis server of its own, which these tests stop under it.
let redis: PrivateRedis;
const workers: ServiceProcess[] = [];

beforeAll(async () => {
  redis = await startPrivateRedis();
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await redis?.stop();
});

const GRACE_MS = 1000;

/** Starts a worker on the private Redis and waits for its first heartbeat. */
async function startWorker(): Promise<ServiceProcess> {
  const prefix = `${testEnv().redisPrefix}:shutdown-${await freePort()}`;
  const worker = startService("agent-worker", {
    WORKER_ID: "worker-shutdown",
    DATABASE_URL: testEnv().databaseUrl,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    SHUTDOWN_GRACE_MS: String(GRACE_MS),
    LOG_LEVEL: "info",
  });
  workers.push(worker);
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  try {
    for (let i = 0; i < 300 && !(await client.zscore(`${prefix}:workers`, "worker-shutdown")); i++) {
      if (worker.child.exitCode !== null) throw new Error(`worker exited:\n${worker.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.disconnect();
  }
  return worker;
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

it("exits 1 within SHUTDOWN_GRACE_MS plus the margin when SIGTERM arrives during a Redis outage, and says what did not close", async () => {
  const worker = await startWorker();
  await redis.stop();
  try {
    const res = await sigtermAndWait(worker, 15_000);
    expect(res).not.toBeNull();
    expect(res!.code).toBe(1);
    expect(res!.tookMs).toBeLessThan(GRACE_MS + 5000 + 3000);
    const line = logLines(worker).find((l) => l.msg === "shutdown timed out: not everything closed");
    expect(line).toMatchObject({ level: 50, notClosed: expect.arrayContaining(["BullMQ worker"]) });
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
  expect(res).not.toBeNull();
  expect(res!.tookMs).toBeLessThan(GRACE_MS + 5000 + 3000);
  // Whether everything closed depends on how soon the connections come back; either way it says so.
  const messages = logLines(worker).map((l) => l.msg);
  if (res!.code === 0) expect(messages).toContain("agent worker stopped");
  else {
    expect(res!.code).toBe(1);
    expect(messages).toContain("shutdown timed out: not everything closed");
  }
});

it("exits 0 on SIGTERM when Redis is up", async () => {
  const worker = await startWorker();
  const res = await sigtermAndWait(worker, 15_000);
  expect(res).toEqual({ code: 0, tookMs: expect.any(Number) });
  expect(logLines(worker).map((l) => l.msg)).toContain("agent worker stopped");
});
