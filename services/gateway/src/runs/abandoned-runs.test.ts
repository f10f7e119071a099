import { newId, type PrismaClient } from "@agentrun/db";
import { runCancelKey } from "@agentrun/events";
import { createLogger } from "@agentrun/logger";
import type { Redis } from "@agentrun/redis";
import { failRun } from "@agentrun/run-state";
import { createTestRun, eventually, testEnv, testStores } from "@agentrun/testing";
import { AbandonedRuns } from "./abandoned-runs";

// Runs whose creation went unanswered, against the real PostgreSQL and Redis: many at once are
// watched with a few statements per round, not one per run.
let prisma: PrismaClient;
let redis: Redis;
const redisPrefix = `${testEnv().redisPrefix}:abandoned`;
testStores({}, (s) => ({ prisma, redis } = s));
const log = createLogger({ service: "test", level: "silent" });

it("looks every abandoned run up together, ends one found queued, leaves a claimed one to its flag, and sets every flag", async () => {
  let lookups = 0;
  // The real database, with its run lookups counted.
  const counted = new Proxy(prisma, {
    get: (target, prop) => (prop === "run" ? { findMany: (args: Parameters<PrismaClient["run"]["findMany"]>[0]) => (lookups++, target.run.findMany(args)) } : Reflect.get(target, prop)),
  });
  const store = { prisma, redis, redisPrefix };
  const runs = new AbandonedRuns({
    prisma: counted,
    redis,
    redisPrefix,
    everyMs: 200,
    watchMs: 1500,
    end: (r) => failRun(store, { id: r.runId, query: r.query }, { code: "unavailable", message: "The run queue is unavailable." }, { onlyIfQueued: true }),
  });
  const queued = await createTestRun(prisma, "queued");
  const claimed = await createTestRun(prisma, "running");
  // Never committed: looked for until the watch is over.
  const missing = Array.from({ length: 2500 }, () => newId("run"));
  const ids = [queued, claimed, ...missing];
  const released = new Map<string, number>();
  for (const runId of ids) runs.add({ runId, query: "q", log, release: async () => void released.set(runId, (released.get(runId) ?? 0) + 1) });

  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: queued } })).status === "failed", { timeoutMs: 5000 });
  await eventually(async () => runs.size === 0, { timeoutMs: 5000 });
  await runs.idle();
  expect(await prisma.run.findUniqueOrThrow({ where: { id: queued }, select: { status: true, errorCode: true } })).toEqual({ status: "failed", errorCode: "unavailable" });
  expect((await prisma.run.findUniqueOrThrow({ where: { id: claimed } })).status).toBe("running");
  // 2,502 runs: three statements a round, for the 1.5 s watch at a round every 200 ms (and the
  // rounds' own time): a statement per run and round would be about 20,000.
  expect(lookups).toBeGreaterThanOrEqual(3 * 2);
  expect(lookups).toBeLessThanOrEqual(3 * 10);
  const flags = await redis.pipeline(ids.map((id) => ["exists", runCancelKey(redisPrefix, id)])).exec();
  expect(flags!.filter(([err, n]) => !err && n === 1)).toHaveLength(ids.length);
  expect([...released.values()].filter((n) => n === 1)).toHaveLength(ids.length);
});

it("keeps trying while the stores are out of reach, and ends the run once PostgreSQL answers", async () => {
  const queued = await createTestRun(prisma, "queued");
  let down = true;
  const flaky = new Proxy(prisma, {
    get: (target, prop) => (prop === "run" ? { findMany: (args: Parameters<PrismaClient["run"]["findMany"]>[0]) => (down ? Promise.reject(new Error("Query read timeout")) : target.run.findMany(args)) } : Reflect.get(target, prop)),
  });
  let released = 0;
  const runs = new AbandonedRuns({
    prisma: flaky,
    redis,
    redisPrefix,
    everyMs: 100,
    watchMs: 10_000,
    end: (r) => failRun({ prisma, redis, redisPrefix }, { id: r.runId, query: r.query }, { code: "unavailable", message: "x" }, { onlyIfQueued: true }),
  });
  runs.add({ runId: queued, query: "q", log, release: async () => void released++ });
  await new Promise((r) => setTimeout(r, 500));
  // Nothing released before PostgreSQL has said whether the run is there.
  expect([released, (await prisma.run.findUniqueOrThrow({ where: { id: queued } })).status, runs.size]).toEqual([0, "queued", 1]);
  down = false;
  await eventually(async () => runs.size === 0, { timeoutMs: 5000 });
  expect([released, (await prisma.run.findUniqueOrThrow({ where: { id: queued } })).status]).toEqual([1, "failed"]);
});
