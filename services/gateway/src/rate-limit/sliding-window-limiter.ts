import { randomUUID } from "node:crypto";
import type { Redis } from "@agentrun/redis";
import { AppError } from "@agentrun/errors";

/**
 * Sliding-window log in one Lua script, so that check-and-admit is atomic on the Redis server and
 * the limit holds exactly across every gateway instance. No maintained CommonJS library offers
 * this on ioredis: rate-limiter-flexible's RateLimiterRedis counts fixed windows (twice the limit
 * can pass around a window edge), sliding-window-rate-limiter is ESM-only, rolling-rate-limiter is
 * unmaintained and needs a native module.
 *
 * The sorted set holds one member per admitted request, scored by its admission time on the Redis
 * clock (`TIME`, allowed before writes since Redis 5 replicates a script's effects), so instances
 * with skewed clocks still agree. A refused request is not recorded: a client that keeps retrying
 * while limited does not extend its own wait.
 *
 * KEYS[1] the log; ARGV[1] window (ms); ARGV[2] limit; ARGV[3] a member unique to this request;
 * ARGV[4] "1" to admit the request if it fits, "0" only to read the window's state.
 * Returns {admitted (1|0), requests in the window (including this one when admitted), ms until
 * one more request would be admitted (0 if one would be now)}.
 */
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local admitted = 0
if ARGV[4] == '1' and count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  count = count + 1
  admitted = 1
end
local wait = 0
if count >= limit then
  -- One more request fits once the entry at index (count - limit) has left the window.
  local entry = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
  -- Nothing to wait for leaves the window when the limit is 0: a full window, then ask again.
  wait = entry[2] and (tonumber(entry[2]) + window - now) or window
end
return {admitted, count, wait}
`;

const COMMAND = "agentrunSlidingWindow";

interface WithSlidingWindow {
  [COMMAND](key: string, windowMs: number, limit: number, member: string, admit: "1" | "0"): Promise<[number, number, number]>;
}

/** A window's state, as {@link SlidingWindowLimiter.peek} reads it. */
export interface RateLimitState {
  limit: number;
  /** Requests still admitted in the current window (after this one, for a hit). */
  remaining: number;
  /** Milliseconds until one more request is admitted; 0 when one would be admitted now. */
  retryAfterMs: number;
}

/** The outcome of one {@link SlidingWindowLimiter.hit}. */
export interface RateLimitResult extends RateLimitState {
  admitted: boolean;
}

export interface SlidingWindowLimiterOptions {
  /**
   * Length of the sliding window.
   * @defaultValue 60000
   */
  windowMs?: number;
  /**
   * Longest wait for Redis before answering 503. While Redis is down, ioredis holds a command
   * until its reconnection attempts fail (seconds with the back-off); a request must not wait
   * that long to learn it cannot be served.
   * @defaultValue 1000
   */
  timeoutMs?: number;
}

/**
 * Counts requests per key over a sliding window in Redis. Fails closed: when Redis cannot be
 * reached the hit throws 503 `unavailable` instead of letting unmetered requests through.
 */
export class SlidingWindowLimiter {
  readonly windowMs: number;
  private readonly timeoutMs: number;
  private readonly redis: Redis & WithSlidingWindow;

  constructor(redis: Redis, opts: SlidingWindowLimiterOptions = {}) {
    this.windowMs = opts.windowMs ?? 60_000;
    this.timeoutMs = opts.timeoutMs ?? 1000;
    // ioredis runs it with EVALSHA and falls back to EVAL when the server lost the script.
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA });
    this.redis = redis as Redis & WithSlidingWindow;
  }

  /** Admits one request under `key` if fewer than `limit` were admitted within the window. */
  hit(key: string, limit: number): Promise<RateLimitResult> {
    return this.run(key, limit, "1");
  }

  /**
   * The state of `key`'s window, as a request sent now would find it, without admitting or
   * recording anything.
   */
  async peek(key: string, limit: number): Promise<RateLimitState> {
    const { remaining, retryAfterMs } = await this.run(key, limit, "0");
    return { limit, remaining, retryAfterMs };
  }

  private async run(key: string, limit: number, admit: "1" | "0"): Promise<RateLimitResult> {
    let reply: [number, number, number];
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      });
      reply = await Promise.race([this.redis[COMMAND](key, this.windowMs, limit, randomUUID(), admit), timeout]);
    } catch (err) {
      throw new AppError("unavailable", { message: "The rate limiter is unavailable; retry shortly.", cause: err });
    } finally {
      clearTimeout(timer);
    }
    const [admitted, count, waitMs] = reply;
    return { admitted: admitted === 1, limit, remaining: Math.max(0, limit - count), retryAfterMs: Math.max(0, waitMs) };
  }
}
