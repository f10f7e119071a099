import { closeRedis, createRedis, Redis } from "@agentrun/redis";
import { testEnv } from "@agentrun/testing";
import { runHeartbeatKey } from "./keys";
import { renewRunHeartbeatIfHeld } from "./run-heartbeat";

// The conditional renewal of a run's heartbeat, on the real Redis.
let redis: Redis;
let n = 0;
let key: string;
beforeAll(() => {
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
});
beforeEach(() => {
  key = runHeartbeatKey(`${testEnv().redisPrefix}:hb-${process.pid}-${++n}`, "run-1");
});
afterAll(async () => {
  await closeRedis(redis);
});

describe("renewRunHeartbeatIfHeld", () => {
  it("renews a heartbeat the worker holds to the whole TTL", async () => {
    await redis.set(key, "worker-a", "PX", 500);
    expect(await renewRunHeartbeatIfHeld(redis, key, "worker-a", 60_000)).toBe(true);
    expect(await redis.get(key)).toBe("worker-a");
    expect(await redis.pttl(key)).toBeGreaterThan(59_000);
  });

  it("leaves another worker's heartbeat as it is, TTL included", async () => {
    await redis.set(key, "worker-b", "PX", 5000);
    expect(await renewRunHeartbeatIfHeld(redis, key, "worker-a", 60_000)).toBe(false);
    expect(await redis.get(key)).toBe("worker-b");
    expect(await redis.pttl(key)).toBeLessThanOrEqual(5000);
  });

  it("sets nothing when the heartbeat is gone", async () => {
    expect(await renewRunHeartbeatIfHeld(redis, key, "worker-a", 60_000)).toBe(false);
    expect(await redis.exists(key)).toBe(0);
  });
});
