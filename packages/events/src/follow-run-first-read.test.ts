import { createPrisma, type PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { createTestRun, eventually, testEnv, testStores } from "@agentrun/testing";
import { runChannel, runLogKey } from "./keys";
import { followRun } from "./run-event-reader";
import { SubscriberHub } from "./subscriber-hub";

// A follower whose first read of the stores is held up (a lock on the events table) while the run's
// channel brings an event: nothing is delivered before that read has succeeded, so a caller whose
// first read fails has sent nothing (the gateway then answers 503, not a stream begun with 200).
let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:first-read`;

testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});

/** Holds an exclusive lock on `run_event_batches` (reads of it wait) until the returned function is called. */
async function lockEventsTable(): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const done = prisma.$transaction(
    async (tx) => {
      await tx.$executeRawUnsafe("LOCK TABLE run_event_batches IN ACCESS EXCLUSIVE MODE");
      locked();
      await released;
    },
    { timeout: 20_000 },
  );
  await isLocked;
  return async () => {
    release();
    await done;
  };
}

/** Follows `runId` after seq 1 with `reader`, checking every `pollMs`; resolves once the run's channel has its subscriber. */
async function follow(reader: PrismaClient, runId: string, pollMs = 60_000) {
  const got: string[] = [];
  const stop = new AbortController();
  const following = followRun({ prisma: reader, redis, redisPrefix, hub, runId, afterSeq: 1, onEvent: (e) => got.push(`event ${e.seq}`), onReady: () => got.push("ready"), signal: stop.signal, pollIntervalMs: pollMs, maxPollIntervalMs: pollMs }).then(
    (end) => `ended: ${end?.type ?? null}`,
    (err: Error) => `failed: ${err.message}`,
  );
  const channel = runChannel(redisPrefix, runId);
  await eventually(async () => ((await redis.pubsub("NUMSUB", channel)) as [string, number])[1] === 1, { intervalMs: 10 });
  const publish = (seq: number) => redis.publish(channel, JSON.stringify({ seq, type: "text_chunk", content: `c${seq}` }));
  return { got, following, publish, stop: () => stop.abort() };
}

it("delivers nothing the channel brings, nor what its checks find in the run's log, before its first read fails, and fails", async () => {
  const runId = await createTestRun(prisma, "running");
  // The log holds seq 2: a check (every 200 ms) finds it there without reading PostgreSQL.
  await redis.rpush(runLogKey(redisPrefix, runId), JSON.stringify({ seq: 2, type: "text_chunk", content: "c2" }));
  // Its first read gives up after a second of waiting for the lock.
  const impatient = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 2, queryTimeoutMs: 1000 });
  const unlock = await lockEventsTable();
  try {
    const f = await follow(impatient, runId, 200);
    await f.publish(3);
    expect(await f.following).toMatch(/^failed: /);
    expect(f.got).toEqual([]);
  } finally {
    await unlock();
    await impatient.$disconnect();
  }
});

it("delivers what the channel brought during its first read once that read has succeeded", async () => {
  const runId = await createTestRun(prisma, "running");
  const unlock = await lockEventsTable();
  const f = await follow(prisma, runId);
  try {
    await f.publish(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(f.got).toEqual([]);
  } finally {
    await unlock();
  }
  await eventually(async () => f.got.length === 2, { intervalMs: 10 });
  expect(f.got).toEqual(["event 2", "ready"]);
  await f.publish(3);
  await eventually(async () => f.got.length === 3, { intervalMs: 10 });
  expect(f.got.at(-1)).toBe("event 3");
  f.stop();
  expect(await f.following).toBe("ended: null");
});
