import { newId } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { testEnv, testStores } from "@agentrun/testing";
import { RUN_LOG_TTL_LIVE_S, runChannel, runLogKey, runWriterKey } from "./keys";
import { appendRunEvents, defineRunLogAppend, type RunLogAppend } from "./run-log-append";

// The append script against the real Redis: the log's expiry when an append leaves it alone.
let redis: Redis;
const redisPrefix = `${testEnv().redisPrefix}:append`;

testStores({}, (s) => {
  redis = s.redis;
  defineRunLogAppend(redis);
});

/** Appends `events` to the run's log as its writer `token`, with the TTL `ttlS` ("0": leave it). */
async function append(runId: string, ttlS: number, events: string[], token = "worker-1"): Promise<unknown> {
  const a: RunLogAppend = {
    logKey: runLogKey(redisPrefix, runId),
    writerKey: runWriterKey(redisPrefix, runId),
    deleteKeys: [],
    token,
    channel: runChannel(redisPrefix, runId),
    message: JSON.stringify(events),
    ttlS,
    events,
  };
  const pipeline = redis.pipeline();
  appendRunEvents(pipeline, a);
  const [err, reply] = (await pipeline.exec())![0]!;
  if (err) throw err;
  return reply;
}

describe("appendRunEvents", () => {
  const runIds: string[] = [];
  const runId = () => (runIds.push(newId("run")), runIds.at(-1)!);
  afterAll(async () => {
    // (testStores disconnects before a file's own afterAll: a connection of its own.)
    const own = redis.duplicate();
    await own.del(...runIds.flatMap((id) => [runLogKey(redisPrefix, id), runWriterKey(redisPrefix, id)]));
    own.disconnect();
  });

  it("gives a log it creates an expiry even when the append leaves the TTL alone (Redis lost the run's state)", async () => {
    const id = runId();
    // A log with events and its expiry, then Redis restarts without its data.
    expect(await append(id, RUN_LOG_TTL_LIVE_S, ["a", "b"])).toBe(1);
    await redis.del(runLogKey(redisPrefix, id), runWriterKey(redisPrefix, id));
    // The writer's next append, not due to refresh the expiry, re-creates the log.
    expect(await append(id, 0, ["c"])).toBe(1);
    expect(await redis.lrange(runLogKey(redisPrefix, id), 0, -1)).toEqual(["c"]);
    for (const key of [runLogKey(redisPrefix, id), runWriterKey(redisPrefix, id)]) {
      const ttl = await redis.ttl(key);
      expect([key, ttl > RUN_LOG_TTL_LIVE_S - 60 && ttl <= RUN_LOG_TTL_LIVE_S]).toEqual([key, true]);
    }
  });

  it("leaves the expiry of a log that was there as it was, and sets the given one", async () => {
    const id = runId();
    expect(await append(id, 100, ["a"])).toBe(1);
    expect(await append(id, 0, ["b", "c"])).toBe(1);
    expect(await redis.ttl(runLogKey(redisPrefix, id))).toBeLessThanOrEqual(100);
    expect(await append(id, 50, ["d"])).toBe(1);
    expect(await redis.ttl(runLogKey(redisPrefix, id))).toBeLessThanOrEqual(50);
    expect(await redis.lrange(runLogKey(redisPrefix, id), 0, -1)).toEqual(["a", "b", "c", "d"]);
  });

  it("refuses another writer's append", async () => {
    const id = runId();
    expect(await append(id, 100, ["a"])).toBe(1);
    expect(await append(id, 0, ["b"], "worker-2")).toBe(0);
    expect(await redis.lrange(runLogKey(redisPrefix, id), 0, -1)).toEqual(["a"]);
  });
});
