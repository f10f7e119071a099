import Redis from "ioredis";
import { createTestRun, testEnv, testPrisma } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { createLogger } from "@agentrun/logger";
import { runCancelKey, runHeartbeatKey } from "@agentrun/events";
import { createRunQueue, enqueueRun, type AgentRunJob, type Queue } from "@agentrun/queue";
import { sweepOrphanedRuns } from "../src/runs/sweeper";
import type { RunDeps } from "../src/runs/run-deps";

// The orphan sweeper against the real database and Redis, called directly so that its timing is
// the test's: a running run without heartbeat or job is ended only after a whole heartbeat TTL.
const HEARTBEAT_TTL_MS = 1500;

let prisma: PrismaClient;
let redis: Redis;
let queue: Queue<AgentRunJob>;
let deps: RunDeps;
let redisPrefix: string;

beforeAll(() => {
  redisPrefix = `${testEnv().redisPrefix}:orphan-sweep`;
  prisma = testPrisma(testEnv().databaseUrl);
  redis = new Redis(testEnv().redisUrl);
  queue = createRunQueue({ connection: redis, redisPrefix });
  // Older than any run of the other test files sharing this database, which this sweeper must not touch.
  const config = { RUN_STALE_AFTER_MS: 90_000 } as RunDeps["config"];
  deps = { config, prisma, redis, redisPrefix, heartbeatTtlMs: HEARTBEAT_TTL_MS, workerId: "sweeper-test", logger: createLogger({ service: "orphan-sweep-test", level: "silent" }) } as RunDeps;
});

afterAll(async () => {
  await queue?.close();
  redis?.disconnect();
  await prisma?.$disconnect();
});

/** A running run started long enough ago to be a sweep candidate. */
async function staleRunningRun(): Promise<string> {
  const runId = await createTestRun(prisma, "running");
  await prisma.run.update({ where: { id: runId }, data: { startedAt: new Date(Date.now() - 120_000), workerId: "worker-gone" } });
  return runId;
}

/**
 * `count` stale running runs, made ten at a time: each is a tenant and a run, several
 * transactions, and a hundred at once waited past the pool's connection timeout on a loaded machine.
 */
async function staleRunningRuns(count: number): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < count) ids.push(...(await Promise.all(Array.from({ length: Math.min(10, count - ids.length) }, () => staleRunningRun()))));
  return ids;
}

const status = async (runId: string) => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status;

it("ends a run that stays without heartbeat and job for a heartbeat TTL, not at first sight", async () => {
  const runId = await staleRunningRun();
  await sweepOrphanedRuns(deps, queue);
  expect(await status(runId)).toBe("running");
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS + 100));
  await sweepOrphanedRuns(deps, queue);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "failed", errorCode: "worker_lost" });
});

it("spares a run whose heartbeat comes back (a live worker after Redis lost its keys)", async () => {
  const runId = await staleRunningRun();
  await sweepOrphanedRuns(deps, queue);
  // The worker's next heartbeat, a third of the TTL later.
  await redis.set(runHeartbeatKey(redisPrefix, runId), "worker-alive", "PX", HEARTBEAT_TTL_MS);
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS / 2));
  await sweepOrphanedRuns(deps, queue);
  expect(await status(runId)).toBe("running");
  // Its heartbeat lapses: the clock starts again from the next sweep that finds it missing.
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS));
  await sweepOrphanedRuns(deps, queue);
  expect(await status(runId)).toBe("running");
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS + 100));
  await sweepOrphanedRuns(deps, queue);
  expect(await status(runId)).toBe("failed");
});

it("leaves a run whose job waits for a worker to that worker, unless its cancel was asked for", async () => {
  // Both workers died; their jobs wait for a free worker (every other one busy).
  const [waiting, cancelled] = [await staleRunningRun(), await staleRunningRun()];
  for (const runId of [waiting, cancelled]) await enqueueRun(queue, { runId });
  await redis.set(runCancelKey(redisPrefix, cancelled), "1", "EX", 60);
  await sweepOrphanedRuns(deps, queue);
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS + 100));
  await sweepOrphanedRuns(deps, queue);
  expect(await status(waiting)).toBe("running");
  expect(await status(cancelled)).toBe("cancelled");
  for (const runId of [waiting, cancelled]) await (await queue.getJob(runId))?.remove();
});

it("reaches an orphan behind more than a page of older live runs", async () => {
  const live = await staleRunningRuns(105);
  await Promise.all(live.map((id) => redis.set(runHeartbeatKey(redisPrefix, id), "worker-alive", "PX", 30_000)));
  const orphan = await staleRunningRun();
  await prisma.run.update({ where: { id: orphan }, data: { startedAt: new Date(Date.now() - 100_000) } });
  await sweepOrphanedRuns(deps, queue);
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS + 100));
  await sweepOrphanedRuns(deps, queue);
  expect(await status(orphan)).toBe("failed");
  expect(await prisma.run.count({ where: { id: { in: live }, status: "running" } })).toBe(105);
}, 60_000);

it("reaches an orphan behind a page whose last run ended while the sweep read on", async () => {
  const live = await staleRunningRuns(100);
  await Promise.all(live.map((id) => redis.set(runHeartbeatKey(redisPrefix, id), "worker-alive", "PX", 30_000)));
  const orphan = await staleRunningRun();
  await prisma.run.update({ where: { id: orphan }, data: { startedAt: new Date(Date.now() - 91_000) } });
  // The last run of the sweep's first page ends just after that page was read.
  let first = true;
  const watched = prisma.$extends({
    query: {
      run: {
        async findMany({ args, query }) {
          const rows = await query(args);
          if (first && rows.length > 0) {
            first = false;
            await prisma.run.update({ where: { id: rows.at(-1)!.id }, data: { status: "completed" } });
          }
          return rows;
        },
      },
    },
  });
  const sweeping = { ...deps, prisma: watched as unknown as PrismaClient };
  await sweepOrphanedRuns(sweeping, queue);
  await new Promise((r) => setTimeout(r, HEARTBEAT_TTL_MS + 100));
  await sweepOrphanedRuns(sweeping, queue);
  expect(first).toBe(false);
  expect(await status(orphan)).toBe("failed");
}, 60_000);
