import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import type { RunEvent } from "@agentrun/contracts";
import { createTestRun, testEnv, testPrisma, within } from "@agentrun/testing";
import { runChannel, runLogKey } from "./keys";
import { followRun } from "./run-event-reader";
import { SubscriberHub } from "./subscriber-hub";

// A follower resuming near the end of a run's long Redis log, on the real stores: its first read,
// its periodic checks and its fills take the entries after what it holds, not the whole log. The
// connection is the test's own, its replies counted (the strings each one held).
let prisma: PrismaClient;
const redis = new Redis(testEnv().redisUrl);
const subscriber = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
const hub = new SubscriberHub(subscriber);
const redisPrefix = `${testEnv().redisPrefix}:follow-tail:${randomUUID().slice(0, 8)}`;
let received = 0;
const stringsIn = (reply: unknown): number => (Array.isArray(reply) ? reply.reduce((n: number, r) => n + stringsIn(r), 0) : typeof reply === "string" || Buffer.isBuffer(reply) ? 1 : 0);
const send = redis.sendCommand.bind(redis);
redis.sendCommand = ((...args: Parameters<Redis["sendCommand"]>) => {
  args[0].promise.then((r) => (received += stringsIn(r)), () => {});
  return send(...args);
}) as Redis["sendCommand"];

const one = (seq: number, type = "text_chunk") => JSON.stringify({ seq, type, content: `c${seq}` });
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const LONG = 200_000;

/** A running run whose log holds events 2..`last` (one per entry). */
async function longRun(last: number): Promise<string> {
  const runId = await createTestRun(prisma, "running");
  const key = runLogKey(redisPrefix, runId);
  const pipeline = redis.pipeline();
  for (let from = 2; from <= last; from += 10_000) pipeline.rpush(key, ...range(from, Math.min(from + 9999, last)).map((s) => one(s)));
  await pipeline.exec();
  return runId;
}

/** Follows `runId` after `afterSeq`: the seqs delivered, how it ended, and the strings received meanwhile. */
async function follow(runId: string, afterSeq: number, opts: { fresh?: boolean; pollMs?: number; whileFollowing?: () => Promise<void> } = {}) {
  const seen: number[] = [];
  const stop = new AbortController();
  received = 0;
  const pollMs = opts.pollMs ?? 60_000;
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  const following = followRun({ prisma, redis, redisPrefix, hub, runId, afterSeq, fresh: opts.fresh, onEvent: (e: RunEvent) => seen.push(e.seq), signal: stop.signal, pollIntervalMs: pollMs, maxPollIntervalMs: pollMs, onReady: ready });
  await within(Promise.race([isReady, following]), 5000);
  await opts.whileFollowing?.();
  const end = await within(following, 5000).catch((err: unknown) => err);
  stop.abort();
  return { seen, end: (end as RunEvent | null)?.seq, received };
}

beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
});
afterAll(async () => {
  const keys = await redis.keys(`${redisPrefix}:*`);
  if (keys.length) await redis.unlink(...keys);
  redis.disconnect();
  subscriber.disconnect();
  await prisma.$disconnect();
});

it.each([false, true])("resumes near the end of a long ended run reading only its tail (fresh: %s)", async (fresh) => {
  const runId = await longRun(LONG);
  await redis.rpush(runLogKey(redisPrefix, runId), one(LONG + 1, "run_completed"));
  const { seen, end, received } = await follow(runId, LONG - 5, { fresh });
  expect(seen).toEqual(range(LONG - 4, LONG + 1));
  expect(end).toBe(LONG + 1);
  expect(received).toBeLessThanOrEqual(20);
});

it("ends a follower past the end of a long run with its terminal event, reading the last entry only", async () => {
  const runId = await longRun(LONG);
  await redis.rpush(runLogKey(redisPrefix, runId), one(LONG + 1, "run_completed"));
  const { seen, end, received } = await follow(runId, LONG + 50, { pollMs: 100 });
  expect(seen).toEqual([LONG + 1]);
  expect(end).toBe(LONG + 1);
  expect(received).toBeLessThanOrEqual(5);
});

it("finds with its periodic check, reading only the new entries, events whose publish was lost", async () => {
  const runId = await longRun(LONG);
  const { seen, end, received } = await follow(runId, LONG, {
    pollMs: 100,
    // Appended to the log without a publish: only the store can tell.
    whileFollowing: async () => void (await redis.rpush(runLogKey(redisPrefix, runId), one(LONG + 1), one(LONG + 2, "run_failed"))),
  });
  expect(seen).toEqual([LONG + 1, LONG + 2]);
  expect(end).toBe(LONG + 2);
  expect(received).toBeLessThanOrEqual(20);
});

it("fills a gap in what the channel brought from the log's tail", async () => {
  const runId = await longRun(LONG);
  const key = runLogKey(redisPrefix, runId);
  const { seen, end, received } = await follow(runId, LONG, {
    whileFollowing: async () => {
      // LONG + 1 is in the log but its publish was lost; LONG + 2 arrives: the gap sends the follower to the store.
      await redis.rpush(key, one(LONG + 1), one(LONG + 2, "run_completed"));
      await redis.publish(runChannel(redisPrefix, runId), one(LONG + 2, "run_completed"));
    },
  });
  expect(seen).toEqual([LONG + 1, LONG + 2]);
  expect(end).toBe(LONG + 2);
  expect(received).toBeLessThanOrEqual(20);
});
