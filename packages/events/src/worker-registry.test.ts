import { closeRedis, createRedis, Redis } from "@agentrun/redis";
import { testEnv } from "@agentrun/testing";
import { WORKER_HEARTBEAT_STALE_MS, workersKey } from "./keys";
import { countLiveWorkers, isWorkerLive, newWorkerId, recordWorkerHeartbeat, WORKER_FORGET_AFTER_MS } from "./worker-registry";

// The registry of live workers on the real Redis.
let redis: Redis;
let n = 0;
let prefix: string;
beforeAll(() => {
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
});
beforeEach(() => {
  prefix = `${testEnv().redisPrefix}:registry-${++n}`;
});
afterEach(() => jest.restoreAllMocks());
afterAll(async () => {
  await closeRedis(redis);
});

/** Redis's own time in ms. */
const redisNow = async () => {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};

describe("the worker registry", () => {
  it("tells whether one worker, by id or as one its host made, beat lately, whatever the others do", async () => {
    const a = newWorkerId("host-a");
    expect(a).toMatch(/^host-a-[0-9a-f]{8}$/);
    await recordWorkerHeartbeat(redis, prefix, a);
    await redis.zadd(workersKey(prefix), (await redisNow()) - WORKER_HEARTBEAT_STALE_MS - 1000, "host-b-5a6b7c8d");
    expect(await isWorkerLive(redis, prefix, { id: a })).toBe(true);
    expect(await isWorkerLive(redis, prefix, { host: "host-a" })).toBe(true);
    // Host b's worker is silent: another host's live worker does not make it healthy.
    expect(await isWorkerLive(redis, prefix, { id: "host-b-5a6b7c8d" })).toBe(false);
    expect(await isWorkerLive(redis, prefix, { host: "host-b" })).toBe(false);
    // Host `host` is neither `host-a` nor `host-b`, whose ids start like its own would.
    expect(await isWorkerLive(redis, prefix, { host: "host" })).toBe(false);
    await recordWorkerHeartbeat(redis, prefix, "host-c-not-hex!");
    expect(await isWorkerLive(redis, prefix, { host: "host-c" })).toBe(false);
    await expect(isWorkerLive(redis, prefix, { host: "" })).rejects.toThrow(/host name/);
  });

  it("counts workers that beat within the stale limit, and not those silent for longer", async () => {
    await recordWorkerHeartbeat(redis, prefix, "w1");
    await recordWorkerHeartbeat(redis, prefix, "w2");
    await redis.zadd(workersKey(prefix), (await redisNow()) - WORKER_HEARTBEAT_STALE_MS - 1000, "silent");
    expect(await countLiveWorkers(redis, prefix)).toBe(2);
  });

  it("forgets workers silent for WORKER_FORGET_AFTER_MS at the next heartbeat, and keeps the others", async () => {
    const now = await redisNow();
    await redis.zadd(workersKey(prefix), now - WORKER_FORGET_AFTER_MS - 1000, "crashed", now - 60_000, "stale");
    await recordWorkerHeartbeat(redis, prefix, "w1");
    expect(await redis.zrange(workersKey(prefix), 0, -1)).toEqual(["stale", "w1"]);
  });

  it("goes by Redis's clock, not by the clock of the process that writes or reads", async () => {
    // This process's clock an hour ahead of Redis's (a gateway host whose clock is off).
    const real = Date.now();
    jest.spyOn(Date, "now").mockReturnValue(real + 3_600_000);
    await recordWorkerHeartbeat(redis, prefix, "w1");
    expect(await countLiveWorkers(redis, prefix)).toBe(1);
    const [score] = await redis.zmscore(workersKey(prefix), "w1");
    expect(Math.abs(Number(score) - real)).toBeLessThan(60_000);
  });
});
