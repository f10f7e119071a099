import { postRun, readSse, createTenant, eventually, watchSse, startPrivateRedis, startStack, testEnv, testPrisma, type PrivateRedis, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(120_000);

// The stack runs on a Redis server of its own, which this test stops and restarts (losing its data).
let redis: PrivateRedis;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  redis = await startPrivateRedis();
  stack = await startStack({ env: { REDIS_URL: redis.url }, workerEnv: { QUEUED_STALE_AFTER_MS: "3000", LOCK_DURATION_MS: "3000", STALLED_INTERVAL_MS: "1000" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
  await prisma?.$disconnect();
});

const postQuery = (query: string) => postRun(stack.gatewayUrl, tenant.headers, { query });

it("loses no event of runs streaming through a Redis restart, answers 503 during the outage, and recovers", async () => {
  expect((await postQuery("warm up")).status).toBe(200);
  const watches = [0, 1, 2].map((i) => watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[sleep:100][chunks:40] through the outage ${i}` }, headers: tenant.headers }));
  // Stop Redis once every run is streaming text.
  for (const w of watches) await w.waitFor((_, all) => all.length >= 3);
  await redis.stop();

  const t0 = Date.now();
  const during = await postQuery("during the outage");
  expect(during.status).toBe(503);
  expect(((await during.json()) as any).error.code).toBe("unavailable");
  expect(Date.now() - t0).toBeLessThan(6000);

  // A streamed request in the outage is answered as quickly, before any stream starts.
  const t1 = Date.now();
  const streamed = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "streamed during the outage" }, headers: tenant.headers, timeoutMs: 15_000 });
  expect(streamed).toMatchObject({ status: 503, events: [] });
  expect(Date.now() - t1).toBeLessThan(6000);

  // The runs go on and end while Redis is down: their streams end too, from what PostgreSQL
  // holds (the worker flushes there, and stores the end though it cannot publish it).
  const results = await Promise.all(watches.map((w) => w.result));
  await redis.start();

  for (const [i, res] of results.entries()) {
    const seqs = res.events.map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, k) => k + 1));
    const terminal = res.events.filter((e) => ["run_completed", "run_failed", "run_cancelled"].includes(e.data.type));
    expect(terminal).toHaveLength(1);
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe(`Echo: through the outage ${i}`);
    // Stored once each, as streamed.
    expect(await readDbEvents({ prisma }, res.events[0]!.data.run_id)).toEqual(res.events.map((e) => e.data));
  }

  // Gateway and worker reconnect by themselves.
  const body = await eventually(async () => {
    const r = await postQuery("after the outage");
    return r.status === 200 ? ((await r.json()) as any) : null;
  });
  expect(body).toMatchObject({ status: "completed", output: "Echo: after the outage" });
});
