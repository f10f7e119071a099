import { postRun, readSse, createTenant, eventually, watchSse, startPrivateRedis, startStack, testEnv, testPrisma, type PrivateRedis, type SseResponse, type Stack, type Tenant } from "@agentrun/testing";
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
  // Five runs at a time: the sixth run of the test waits in the queue when Redis stops.
  stack = await startStack({ env: { REDIS_URL: redis.url }, workerEnv: { WORKER_CONCURRENCY: "5", QUEUED_STALE_AFTER_MS: "3000", LOCK_DURATION_MS: "3000", STALLED_INTERVAL_MS: "1000" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
  await prisma?.$disconnect();
});

const postQuery = (query: string) => postRun(stack.gatewayUrl, tenant.headers, { query });

const isTerminal = (type: string) => ["run_completed", "run_failed", "run_cancelled"].includes(type);

/** A stream's events are the run's every event once, in order, ending completed with `text`; as stored. */
async function expectWhole(res: SseResponse, text: string): Promise<void> {
  const seqs = res.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, k) => k + 1));
  expect(res.events.filter((e) => isTerminal(e.data.type))).toHaveLength(1);
  expect(res.events.at(-1)!.data.type).toBe("run_completed");
  expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe(text);
  expect(await readDbEvents({ prisma }, res.events[0]!.data.run_id)).toEqual(res.events.map((e) => e.data));
}

it("loses no event of runs streaming through a Redis restart, answers 503 during the outage, and recovers", async () => {
  expect((await postQuery("warm up")).status).toBe(200);
  const watch = (query: string) => watchSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: tenant.headers, timeoutMs: 90_000 });
  // Three runs that end while Redis is down (about 8 s each), two that go on after it is back
  // (about 30 s), and one that waits in the queue (every worker slot taken) when it stops: Redis
  // restarts empty, its job lost.
  const short = [0, 1, 2].map((i) => watch(`[sleep:300][chunks:40] through the outage ${i}`));
  const long = [0, 1].map((i) => watch(`[sleep:1200][chunks:30] across the restart ${i}`));
  for (const w of [...short, ...long]) await w.waitFor((_, all) => all.length >= 3);
  const queued = watch("[chunks:3] queued at the outage");
  await queued.waitFor((e) => e.type === "run_started");
  expect(await prisma.run.findUniqueOrThrow({ where: { id: queued.events[0].run_id }, select: { status: true } })).toEqual({ status: "queued" });
  for (const w of short) expect(w.events.some((e) => isTerminal(e.type))).toBe(false);
  await redis.stop();

  const t0 = Date.now();
  const during = await postQuery("during the outage");
  expect(during.status).toBe(503);
  expect(await during.json()).toEqual({ error: { code: "unavailable", message: expect.stringMatching(/\S/) } });
  expect(Date.now() - t0).toBeLessThan(6000);

  // A streamed request in the outage is answered as quickly, before any stream starts.
  const t1 = Date.now();
  const streamed = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "streamed during the outage" }, headers: tenant.headers, timeoutMs: 15_000 });
  expect(streamed).toMatchObject({ status: 503, events: [] });
  expect(Date.now() - t1).toBeLessThan(6000);

  // The short runs end while Redis is down: their streams end too, from what PostgreSQL holds
  // (the worker flushes there, and stores the end though it cannot publish it).
  const shortResults = await Promise.all(short.map((w) => w.result));
  // Redis comes back (empty) while the long runs still stream.
  for (const w of long) expect(w.events.some((e) => isTerminal(e.type))).toBe(false);
  await redis.start();

  for (const [i, res] of shortResults.entries()) await expectWhole(res, `Echo: through the outage ${i}`);
  for (const [i, w] of long.entries()) await expectWhole(await w.result, `Echo: across the restart ${i}`);
  // The queued run whose job Redis lost is queued again by the workers and runs; its stream,
  // open since before the outage, gets all of it.
  await expectWhole(await queued.result, "Echo: queued at the outage");

  // Gateway and worker reconnect by themselves.
  const body = await eventually(async () => {
    const r = await postQuery("after the outage");
    return r.status === 200 ? ((await r.json()) as any) : null;
  });
  expect(body).toMatchObject({ status: "completed", output: "Echo: after the outage" });
  // Every run ended completed but the two refused (never created) ones: none stays queued or running.
  const runs = await prisma.run.findMany({ where: { orgId: tenant.orgId }, select: { query: true, status: true } });
  expect(runs.filter((r) => r.status !== "completed")).toEqual([]);
  expect(runs.map((r) => r.query).filter((q) => q.includes("during the outage"))).toEqual([]);
  expect(runs).toHaveLength(8);
});
