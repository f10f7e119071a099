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
 * Each sorted set holds one member per admitted request, scored by its admission time on the Redis
 * clock (`TIME`, allowed before writes since Redis 5 replicates a script's effects), so instances
 * with skewed clocks still agree. A refused request is not recorded: a client that keeps retrying
 * while limited does not extend its own wait. A request counts once however often its script
 * runs: ioredis sends a command again when the connection drops before its reply came, and the
 * second run finds the request's member already recorded. With several keys a request is
 * admitted only when every window has room, and then recorded in all of them; refused, it is
 * recorded in none.
 *
 * KEYS the logs; ARGV[1] window (ms); ARGV[2] a member unique to this request; ARGV[3] "1" to admit
 * the request if it fits, "0" only to read the windows' state; ARGV[3 + i] the limit of KEYS[i].
 * Returns {admitted (1|0), then per key: requests in the window (including this one when
 * admitted), ms until one more request would be admitted (0 if one would be now)}.
 */
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local admit = ARGV[3] == '1'
-- Run again for the same request (a reply lost with its connection, and the command sent again):
-- it was admitted and recorded the first time, in every window; it is neither checked nor added.
local recorded = admit and redis.call('ZSCORE', KEYS[1], ARGV[2]) ~= false
local counts = {}
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  counts[i] = redis.call('ZCARD', key)
  if not recorded and counts[i] >= tonumber(ARGV[3 + i]) then admit = false end
end
local reply = {admit and 1 or 0}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[3 + i])
  if admit and not recorded then
    redis.call('ZADD', key, now, ARGV[2])
    redis.call('PEXPIRE', key, window)
    counts[i] = counts[i] + 1
  end
  local wait = 0
  if counts[i] >= limit then
    -- One more request fits once the entry at index (count - limit) has left the window.
    local entry = redis.call('ZRANGE', key, counts[i] - limit, counts[i] - limit, 'WITHSCORES')
    -- Nothing to wait for leaves the window when the limit is 0: a full window, then ask again.
    wait = entry[2] and (tonumber(entry[2]) + window - now) or window
  end
  reply[2 * i] = counts[i]
  reply[2 * i + 1] = wait
end
return reply
`;

const COMMAND = "agentrunSlidingWindows";

interface WithSlidingWindow {
  /** Without a fixed `numberOfKeys`, the first argument is the number of keys. */
  [COMMAND](numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>;
}

/** One window of a {@link SlidingWindowLimiter.hitAll}: its Redis key and its limit. */
export interface RateLimitWindow {
  key: string;
  limit: number;
}

/** One result per window, in the windows' order. */
type ResultsOf<W extends readonly RateLimitWindow[]> = { [I in keyof W]: RateLimitResult };

/** A window's state, as {@link SlidingWindowLimiter.peek} reads it. */
export interface RateLimitState {
  limit: number;
  /** Requests still admitted in the current window (after this one, for a hit). */
  remaining: number;
  /** Milliseconds until one more request is admitted; 0 when one would be admitted now. */
  retryAfterMs: number;
}

/** The outcome of one {@link SlidingWindowLimiter.hit}, or for one window of a {@link SlidingWindowLimiter.hitAll}. */
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
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { lua: SLIDING_WINDOW_LUA });
    this.redis = redis as Redis & WithSlidingWindow;
  }

  /** Admits one request under `key` if fewer than `limit` were admitted within the window. */
  async hit(key: string, limit: number): Promise<RateLimitResult> {
    const [result] = await this.run([{ key, limit }], "1");
    return result;
  }

  /**
   * Admits one request under every window's key if each has room, recording it in all of them;
   * otherwise records it in none. One atomic script, so a request refused by one window never
   * uses up another's budget. The results follow `windows`' order and share `admitted`. The keys
   * must live on one Redis server (no cluster spreading them over slots).
   */
  hitAll<const W extends readonly RateLimitWindow[]>(windows: W): Promise<ResultsOf<W>> {
    return this.run(windows, "1");
  }

  /**
   * The state of `key`'s window, as a request sent now would find it, without admitting or
   * recording anything.
   */
  async peek(key: string, limit: number): Promise<RateLimitState> {
    const [{ remaining, retryAfterMs }] = await this.run([{ key, limit }], "0");
    return { limit, remaining, retryAfterMs };
  }

  private async run<const W extends readonly RateLimitWindow[]>(windows: W, admit: "1" | "0"): Promise<ResultsOf<W>> {
    let reply: number[];
    let timer: NodeJS.Timeout | undefined;
    const member = randomUUID();
    const args = [...windows.map((w) => w.key), this.windowMs, member, admit, ...windows.map((w) => w.limit)];
    // A call that throws instead of rejecting is a rejection too (503, not 500).
    const script = Promise.resolve().then(() => this.redis[COMMAND](windows.length, ...args));
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      });
      reply = await Promise.race([script, timeout]);
    } catch (err) {
      // The script may still run once Redis answers (ioredis holds it while it reconnects, a
      // frozen server runs what it was sent): a request answered 503 must not count then. The
      // removal goes on the same connection after the script, so it runs after it; and once more
      // when the script's late answer comes (ioredis sends it again after the removal when the
      // server no longer knew it, NOSCRIPT).
      if (admit === "1") {
        const undo = () => {
          for (const w of windows) this.redis.zrem(w.key, member).catch(() => {});
        };
        undo();
        script.then(undo, () => {});
      }
      throw new AppError("unavailable", { message: "The rate limiter is unavailable; retry shortly.", cause: err });
    } finally {
      clearTimeout(timer);
    }
    const admitted = reply[0] === 1;
    return windows.map(({ limit }, i) => {
      const count = reply[1 + 2 * i] ?? 0;
      const waitMs = reply[2 + 2 * i] ?? 0;
      return { admitted, limit, remaining: Math.max(0, limit - count), retryAfterMs: Math.max(0, waitMs) };
    }) as ResultsOf<W>;
  }
}
