import { createTestRun, testEnv, testPrisma } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { followRun } from "./run-event-reader";
import { SubscriberHub } from "./subscriber-hub";

// A follower while Redis is out of reach (its connections point nowhere) and PostgreSQL holds a
// run's events with a gap (seq 2 not stored yet: its batch failed, a later one did not).
let prisma: PrismaClient;
// Closed for good: every command is refused at once, as after a failed reconnection.
const redis = new Redis(testEnv().redisUrl, { lazyConnect: true });
redis.disconnect();
const subscriber = createRedis({ url: "redis://127.0.0.1:1", role: "subscriber" });

beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
});
afterAll(async () => {
  redis.disconnect();
  subscriber.disconnect();
  await prisma.$disconnect();
});

it("reads PostgreSQL at its checks' pace while a gap stays open, not over and over", async () => {
  const runId = await createTestRun(prisma, "running");
  const chunks = [3, 4].map((seq) => ({ seq, type: "text_chunk", content: `c${seq}` }));
  await prisma.runEventBatch.create({ data: { runId, firstSeq: 3, lastSeq: 4, events: chunks } });
  let reads = 0;
  const counted = new Proxy(prisma, {
    get(target, key) {
      if (key !== "$queryRaw") return Reflect.get(target, key);
      return (...args: Parameters<PrismaClient["$queryRaw"]>) => {
        reads++;
        return target.$queryRaw(...args);
      };
    },
  });
  const delivered: number[] = [];
  const stop = new AbortController();
  const following = followRun({ prisma: counted, redis, redisPrefix: "gap-test", hub: new SubscriberHub(subscriber), runId, afterSeq: 1, onEvent: (e) => delivered.push(e.seq), signal: stop.signal, pollIntervalMs: 200, maxPollIntervalMs: 200 });
  await new Promise((r) => setTimeout(r, 2000));
  stop.abort();
  expect(await following).toBeNull();
  expect(delivered).toEqual([]);
  // A check every 200 ms: about ten in 2 s.
  expect(reads).toBeGreaterThanOrEqual(3);
  expect(reads).toBeLessThanOrEqual(15);
});
