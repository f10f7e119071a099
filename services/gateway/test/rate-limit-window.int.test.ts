import { randomUUID } from "node:crypto";
import { createRedis, closeRedis, type Redis } from "@agentrun/redis";
import { AppError } from "@agentrun/errors";
import { startPrivateRedis, startTcpRelay, testEnv } from "@agentrun/testing";
import { SlidingWindowLimiter } from "../src/rate-limit/sliding-window-limiter";

// The limiter itself on the real Redis, with a short window so that sliding can be watched.
let redis: Redis;
beforeAll(() => {
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
});
afterAll(async () => {
  await closeRedis(redis);
});

const key = () => `${testEnv().redisPrefix}:rl:test:${randomUUID()}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("SlidingWindowLimiter", () => {
  it("slides: an admitted request frees its slot one window after its own admission, not at a window edge", async () => {
    // Half a window between the first admissions and the third: a window of seconds, so that a
    // stall of the machine running the test cannot make the third leave with the first two.
    const windowMs = 3000;
    const limiter = new SlidingWindowLimiter(redis, { windowMs });
    const k = key();
    const firstSent = Date.now();
    expect(await limiter.hit(k, 3)).toEqual({ admitted: true, limit: 3, remaining: 2, retryAfterMs: 0 });
    const firstAnswered = Date.now();
    expect(await limiter.hit(k, 3)).toMatchObject({ admitted: true, remaining: 1, retryAfterMs: 0 });
    await sleep(windowMs / 2);
    const thirdSent = Date.now();
    const third = await limiter.hit(k, 3);
    const thirdAnswered = Date.now();
    expect(third).toMatchObject({ admitted: true, remaining: 0 });
    // Full now: the first admission leaves the window one window after it was made, counted from
    // the third's (each known to within its request's round trip; 2 ms for rounding).
    expect(third.retryAfterMs).toBeGreaterThanOrEqual(windowMs - (thirdAnswered - firstSent) - 2);
    expect(third.retryAfterMs).toBeLessThanOrEqual(windowMs - (thirdSent - firstAnswered) + 2);
    const refused = await limiter.hit(k, 3);
    expect(refused.admitted).toBe(false);
    expect(refused.remaining).toBe(0);

    await sleep(refused.retryAfterMs + 30);
    // The two oldest have left; the third (half a window younger) still counts.
    expect(await limiter.hit(k, 3)).toMatchObject({ admitted: true, remaining: 1 });
    expect(await limiter.hit(k, 3)).toMatchObject({ admitted: true, remaining: 0 });
    expect((await limiter.hit(k, 3)).admitted).toBe(false);
  });

  it("is exact under concurrency and leaves nothing behind after the window", async () => {
    const limiter = new SlidingWindowLimiter(redis, { windowMs: 500 });
    const k = key();
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.hit(k, 37)));
    expect(results.filter((r) => r.admitted)).toHaveLength(37);
    expect(new Set(results.filter((r) => r.admitted).map((r) => r.remaining)).size).toBe(37);
    expect(await redis.zcard(k)).toBe(37);
    expect(await redis.pttl(k)).toBeLessThanOrEqual(500);
    await sleep(600);
    expect(await redis.exists(k)).toBe(0);
  });

  it("waits for enough entries to leave when the limit was lowered below the window's count", async () => {
    const limiter = new SlidingWindowLimiter(redis, { windowMs: 60_000 });
    const k = key();
    for (let i = 0; i < 5; i++) await limiter.hit(k, 5);
    const lowered = await limiter.hit(k, 2);
    expect(lowered).toMatchObject({ admitted: false, limit: 2, remaining: 0 });
    expect(lowered.retryAfterMs).toBeGreaterThan(59_000);
  });

  it("fails closed with 503 unavailable when Redis cannot be reached", async () => {
    const down = createRedis({ url: "redis://127.0.0.1:1", role: "commands" });
    try {
      const t0 = Date.now();
      const err = await new SlidingWindowLimiter(down).hit(key(), 10).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe("unavailable");
      expect((err as AppError).status).toBe(503);
      expect(Date.now() - t0).toBeLessThan(3000);
    } finally {
      down.disconnect();
    }
  });

  it("counts a request once when its reply is lost and ioredis sends the script again", async () => {
    const target = new URL(testEnv().redisUrl);
    const relay = await startTcpRelay(target.hostname, Number(target.port || 6379));
    const lossy = createRedis({ url: `redis://127.0.0.1:${relay.port}`, role: "commands" });
    try {
      const limiter = new SlidingWindowLimiter(lossy);
      const k = key();
      // The request that fills the window: admitted, though its script ran twice.
      expect(await limiter.hit(k, 2)).toMatchObject({ admitted: true, remaining: 1 });
      relay.loseNextReply();
      expect(await limiter.hit(k, 2)).toMatchObject({ admitted: true, remaining: 0 });
      expect(relay.accepted()).toBe(2);
      expect(await redis.zcard(k)).toBe(2);
      // Both windows of a hitAll, with room left: the remaining counts are not one short.
      const windows = [{ key: `${k}:a`, limit: 10 }, { key: `${k}:b`, limit: 5 }] as const;
      relay.loseNextReply();
      const [a, b] = await limiter.hitAll(windows);
      expect([a, b]).toEqual([expect.objectContaining({ admitted: true, remaining: 9 }), expect.objectContaining({ admitted: true, remaining: 4 })]);
      expect([await redis.zcard(`${k}:a`), await redis.zcard(`${k}:b`)]).toEqual([1, 1]);
      expect(relay.accepted()).toBe(3);
    } finally {
      lossy.disconnect();
      await relay.close();
    }
  });

  it("does not count a request it answered 503 when Redis runs the script late", async () => {
    // A frozen server keeps what it was sent and runs it when it resumes.
    const server = await startPrivateRedis();
    const frozen = createRedis({ url: server.url, role: "commands" });
    try {
      const limiter = new SlidingWindowLimiter(frozen, { timeoutMs: 300 });
      const k = key();
      expect(await limiter.hit(k, 10)).toMatchObject({ admitted: true, remaining: 9 });
      server.freeze();
      const err = await limiter.hitAll([{ key: k, limit: 10 }, { key: `${k}:other`, limit: 10 }]).catch((e: unknown) => e);
      expect((err as AppError).code).toBe("unavailable");
      server.thaw();
      // Answered after the late script and what follows it: the first request alone counts.
      expect(await frozen.zcard(k)).toBe(1);
      expect(await frozen.zcard(`${k}:other`)).toBe(0);
      expect(await limiter.peek(k, 10)).toMatchObject({ remaining: 9 });
    } finally {
      server.thaw();
      frozen.disconnect();
      await server.stop();
    }
  });
});
