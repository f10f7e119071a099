import type { ChainableCommander } from "ioredis";
import { closeRedis, createRedis, Redis } from "@agentrun/redis";
import { testEnv } from "@agentrun/testing";
import { RedisWriteBatcher, type BatchedWrite } from "./redis-write-batcher";

// Real Redis; jest.spyOn keeps ioredis's own pipeline and only counts the pipelines sent.
let redis: Redis;
const prefix = `${testEnv().redisPrefix}:batcher`;
let n = 0;

beforeEach(async () => {
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
  await redis.ping();
});
afterEach(async () => {
  jest.restoreAllMocks();
  await closeRedis(redis);
});

/** A writer that pushes `value` onto `key` and records what its batch answered. */
function source(key: string, value: string) {
  let settle!: (r: { err: Error | null; replies: unknown[] }) => void;
  const done = new Promise<{ err: Error | null; replies: unknown[] }>((r) => (settle = r));
  const write: BatchedWrite = {
    appendTo: (p: ChainableCommander) => (p.rpush(key, value), 1),
    written: (err, replies) => settle({ err, replies }),
  };
  return { write, done };
}

describe("RedisWriteBatcher", () => {
  it("sends a lone write at once, and what is asked for meanwhile as one batch when that one is answered", async () => {
    const key = `${prefix}:${++n}`;
    const pipeline = jest.spyOn(redis, "pipeline");
    const batcher = new RedisWriteBatcher(redis);
    const [a, b, c] = ["a", "b", "c"].map((v) => source(key, v));
    batcher.request(a!.write);
    expect(pipeline).toHaveBeenCalledTimes(1);
    batcher.request(b!.write);
    batcher.request(c!.write);
    // b and c wait for a's batch to be answered, past the end of this turn of the event loop
    // (whose check phase comes before the poll that can read a's reply).
    expect(pipeline).toHaveBeenCalledTimes(1);
    await new Promise((r) => setImmediate(r));
    expect(pipeline).toHaveBeenCalledTimes(1);
    await a!.done;
    expect(pipeline).toHaveBeenCalledTimes(2);
    expect((await b!.done).replies).toEqual([2]);
    expect((await c!.done).replies).toEqual([3]);
    expect(pipeline).toHaveBeenCalledTimes(2);
    expect(await redis.lrange(key, 0, -1)).toEqual(["a", "b", "c"]);
  });

  it("reports a failed command to its own writer only, and goes on sending", async () => {
    const key = `${prefix}:${++n}`;
    const wrongType = `${prefix}:${++n}`;
    await redis.set(wrongType, "a string");
    const batcher = new RedisWriteBatcher(redis);
    const first = source(key, "1");
    const bad = source(wrongType, "x");
    const good = source(key, "2");
    batcher.request(first.write);
    batcher.request(bad.write);
    batcher.request(good.write);
    expect((await first.done).err).toBeNull();
    expect((await bad.done).err?.message).toMatch(/WRONGTYPE/);
    expect((await good.done).err).toBeNull();
    const later = source(key, "3");
    batcher.request(later.write);
    expect((await later.done).replies).toEqual([3]);
  });
});
