import type { PrismaClient } from "@agentrun/db";
import { runHeartbeatKey } from "@agentrun/events";
import { createRunQueue, enqueueRun } from "@agentrun/queue";
import { createTestRun, eventually, freePort, startService, startTcpRelay, testEnv, testPrisma, waitForOk, type ServiceProcess, type TcpRelay } from "@agentrun/testing";
import { Redis } from "ioredis";

jest.setTimeout(60_000);

// The worker reaches the shared Redis through a relay, which cuts it off alone: the run's
// heartbeat lapses (deleted here, as a long outage would let it expire) while the run goes on.
const WORKER_ID = "worker-behind-relay";
/** A renewal every 30 s: the heartbeat comes back at once on reconnect only if the worker beats then. */
const LOCK_DURATION_MS = 90_000;

let relay: TcpRelay;
let model: ServiceProcess;
let worker: ServiceProcess;
let prisma: PrismaClient;
let redis: Redis;
let prefix: string;

beforeAll(async () => {
  const env = testEnv();
  const target = new URL(env.redisUrl);
  relay = await startTcpRelay(target.hostname, Number(target.port || 6379));
  const port = await freePort();
  model = startService("scripted-model", { SCRIPTED_MODEL_PORT: String(port) });
  await waitForOk(`http://127.0.0.1:${port}/health`, model);
  prisma = testPrisma(env.databaseUrl);
  redis = new Redis(env.redisUrl, { maxRetriesPerRequest: 1 });
  prefix = `${env.redisPrefix}:reconnect-${port}`;
  worker = startService("agent-worker", {
    WORKER_ID,
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: `redis://127.0.0.1:${relay.port}${target.pathname}`,
    REDIS_PREFIX: prefix,
    SCRIPTED_MODEL_URL: `http://127.0.0.1:${port}/v1`,
    LOCK_DURATION_MS: String(LOCK_DURATION_MS),
    SHUTDOWN_GRACE_MS: "1000",
  });
});

afterAll(async () => {
  await Promise.all([worker, model].map((p) => p?.kill()));
  await relay?.close();
  redis?.disconnect();
  await prisma?.$disconnect();
});

it("sets a running run's heartbeat again as soon as its Redis connection is back, not a renewal interval later", async () => {
  const runId = await createTestRun(prisma, "queued");
  await prisma.run.update({ where: { id: runId }, data: { query: "[hang] until the test ends" } });
  const connection = new Redis(testEnv().redisUrl, { maxRetriesPerRequest: null });
  const queue = createRunQueue({ connection, redisPrefix: prefix });
  try {
    await enqueueRun(queue, { runId });
  } finally {
    await queue.close();
    connection.disconnect();
  }
  const hbKey = runHeartbeatKey(prefix, runId);
  await eventually(async () => (await redis.get(hbKey)) === WORKER_ID, { timeoutMs: 20_000 });

  relay.setDown(true);
  await redis.del(hbKey);
  // Long enough for the worker's connections to notice and start reconnecting.
  await new Promise((r) => setTimeout(r, 1000));
  const before = relay.accepted();
  relay.setDown(false);
  const back = Date.now();
  // ioredis retries at most every 2 s; the heartbeat follows the command connection's return.
  await eventually(async () => (await redis.get(hbKey)) === WORKER_ID, { timeoutMs: 4000 });
  expect(Date.now() - back).toBeLessThan(4500);
  expect(relay.accepted()).toBeGreaterThan(before);
  expect(await prisma.run.findUnique({ where: { id: runId }, select: { status: true } })).toEqual({ status: "running" });
});
