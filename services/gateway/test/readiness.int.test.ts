import { dropDatabase, ensureDatabase } from "@agentrun/db";
import { eventually, freePort, startPrivateRedis, startService, testEnv, waitForOk, type ServiceProcess } from "@agentrun/testing";

// GET /readyz is 200 only when the stack can serve runs: a migrated database, Redis, and a
// worker that reaches its own database.
const started: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
});

const start = (service: string, env: Record<string, string>) => {
  const proc = startService(service, env);
  started.push(proc);
  return proc;
};

/** A gateway on its own Redis prefix; `env` overrides the test database and Redis. */
async function gateway(prefix: string, env: Record<string, string> = {}): Promise<string> {
  const port = await freePort();
  const proc = start("gateway", { DATABASE_URL: testEnv().databaseUrl, REDIS_URL: testEnv().redisUrl, REDIS_PREFIX: prefix, PORT: String(port), ...env });
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/healthz`, proc);
  return url;
}

const worker = (prefix: string, databaseUrl: string) =>
  start("agent-worker", { DATABASE_URL: databaseUrl, REDIS_URL: testEnv().redisUrl, REDIS_PREFIX: prefix, WORKER_CONCURRENCY: "1" });

const readiness = async (url: string) => {
  const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(10_000) });
  const body = (await res.json()) as { checks?: Record<string, unknown>; error?: { details?: Record<string, unknown> } };
  return { status: res.status, checks: body.checks ?? body.error?.details };
};

it("does not count a worker that cannot reach its database, and counts one that can", async () => {
  const prefix = `${testEnv().redisPrefix}:ready-${await freePort()}`;
  const url = await gateway(prefix);
  const lost = worker(prefix, "postgresql://postgres@127.0.0.1:1/agentrun");
  // Long enough for several of its heartbeats, had it sent any.
  await new Promise((r) => setTimeout(r, 7000));
  expect(lost.child.exitCode).toBeNull();
  expect(await readiness(url)).toEqual({ status: 503, checks: { database: "ok", redis: "ok", workers: 0 } });
  worker(prefix, testEnv().databaseUrl);
  await waitForOk(`${url}/readyz`, null, 30_000);
  expect(await readiness(url)).toEqual({ status: 200, checks: { database: "ok", redis: "ok", workers: 1 } });
});

it("is 503 not_migrated on a database without this code's migrations", async () => {
  const empty = new URL(testEnv().databaseUrl);
  empty.pathname = `${empty.pathname}_ready_empty`;
  await ensureDatabase(empty.toString());
  try {
    const prefix = `${testEnv().redisPrefix}:ready-empty-${await freePort()}`;
    worker(prefix, testEnv().databaseUrl);
    const url = await gateway(prefix, { DATABASE_URL: empty.toString() });
    // The first checks may time out on a busy machine ("unavailable"); then it says why.
    await eventually(async () => (await readiness(url)).checks?.database === "not_migrated");
    expect(await readiness(url)).toMatchObject({ status: 503, checks: { database: "not_migrated", redis: "ok" } });
    // Its requests get 503 too, not 500: the key's lookup finds no table.
    const res = await fetch(`${url}/api/tasks`, { headers: { authorization: `Bearer ar_live_${"x".repeat(32)}` } });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: { code: "unavailable", message: "The service's database is not migrated to this version yet; retry once it is." } });
  } finally {
    await Promise.all(started.splice(0).map((p) => p.stop()));
    await dropDatabase(empty.toString());
  }
});

it("answers 503 instead of hanging while Redis accepts connections but answers nothing, and recovers", async () => {
  // A Redis that hangs (a frozen server, a half-open connection): it takes every byte, answers none.
  const redis = await startPrivateRedis();
  try {
    const url = await gateway(`${testEnv().redisPrefix}:ready-frozen`, { REDIS_URL: redis.url });
    expect(await readiness(url)).toMatchObject({ status: 503, checks: { redis: "ok", workers: 0 } });
    redis.freeze();
    // `readiness` gives up after 10 s: only the gateway's own time limit on its checks answers.
    expect(await readiness(url)).toMatchObject({ status: 503, checks: { redis: "unavailable", workers: 0 } });
    redis.thaw();
    await eventually(async () => (await readiness(url)).checks?.redis === "ok");
    expect(await readiness(url)).toEqual({ status: 503, checks: { database: "ok", redis: "ok", workers: 0 } });
  } finally {
    redis.thaw();
    await redis.stop();
  }
});
