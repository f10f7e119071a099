import { createTenant, startStack, testEnv, testPrisma, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { runCancelKey } from "@agentrun/events";
import { createRedis, type Redis } from "@agentrun/redis";

// A cancel whose control message a worker did not get (its subscriber was reconnecting when it
// was published) must still stop the run: the worker reads the run's cancel flag with its
// heartbeat, every third of LOCK_DURATION_MS.
let stack: Stack;
let prisma: PrismaClient;
let redis: Redis;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack({ memory: false, workerEnv: { LOCK_DURATION_MS: "3000" } });
  prisma = testPrisma(testEnv().databaseUrl);
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  redis?.disconnect();
  await prisma?.$disconnect();
});

it("stops a running run whose cancel flag is set without a control message", async () => {
  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[sleep:200][chunks:50] ${"flagged ".repeat(10)}` }, headers: tenant.headers });
  await w.waitFor((e) => e.type === "text_chunk");
  const runId = w.events[0].run_id as string;
  await redis.set(runCancelKey(stack.env.REDIS_PREFIX!, runId), "1", "EX", 60);

  const done = await w.result;
  expect(done.events.at(-1)!.data).toMatchObject({ type: "run_cancelled", run_id: runId });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
  expect(run.status).toBe("cancelled");
  expect(run.task).toMatchObject({ status: "completed", activeRunId: null });
  const seqs = done.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  // The flag goes with the run's end, not a day later.
  expect(await redis.exists(runCancelKey(stack.env.REDIS_PREFIX!, runId))).toBe(0);
});
