import { createTenant, readSse, startPrivateRedis, startStack, testEnv, testPrisma, type PrivateRedis, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

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

const postRun = (query: string) =>
  fetch(`${stack.gatewayUrl}/api/run`, {
    method: "POST",
    headers: { ...tenant.headers, "content-type": "application/json" },
    body: JSON.stringify({ query, stream: false }),
    signal: AbortSignal.timeout(20_000),
  });

it("loses no event of runs streaming through a Redis restart, answers 503 during the outage, and recovers", async () => {
  expect((await postRun("warm up")).status).toBe(200);
  const seen = [0, 0, 0];
  const streams = [0, 1, 2].map((i) =>
    readSse(`${stack.gatewayUrl}/api/run`, {
      body: { query: `[sleep:100][chunks:40] through the outage ${i}` },
      headers: tenant.headers,
      timeoutMs: 60_000,
      until: () => {
        seen[i]!++;
        return false;
      },
    }),
  );
  // Stop Redis once every run is streaming text.
  while (seen.some((n) => n < 3)) await new Promise((r) => setTimeout(r, 20));
  await redis.stop();

  const t0 = Date.now();
  const during = await postRun("during the outage");
  expect(during.status).toBe(503);
  expect(((await during.json()) as any).error.code).toBe("unavailable");
  expect(Date.now() - t0).toBeLessThan(6000);

  await new Promise((r) => setTimeout(r, 1500));
  await redis.start();

  const results = await Promise.all(streams);
  if (process.env.DEBUG_FAULTS) console.log(stack.gateway.output().slice(-4000), stack.workers[0]!.output().slice(-4000));
  for (const [i, res] of results.entries()) {
    const seqs = res.events.map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, k) => k + 1));
    const terminal = res.events.filter((e) => ["run_completed", "run_failed", "run_cancelled"].includes(e.data.type));
    expect(terminal).toHaveLength(1);
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe(`Echo: through the outage ${i}`);
    const stored = await prisma.runEvent.count({ where: { runId: res.events[0]!.data.run_id } });
    expect(stored).toBe(res.events.length);
  }

  // Gateway and worker reconnect by themselves.
  const deadline = Date.now() + 20_000;
  let body: any = null;
  while (Date.now() < deadline) {
    const res = await postRun("after the outage").catch(() => null);
    if (res?.status === 200) {
      body = await res.json();
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  expect(body).toMatchObject({ status: "completed", output: "Echo: after the outage" });
});
