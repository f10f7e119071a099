import type { Redis } from "ioredis";
import { WORKER_HEARTBEAT_STALE_MS, workersKey } from "./keys";

/**
 * A worker that has not beaten for this long leaves the registry (it counts as gone after
 * {@link WORKER_HEARTBEAT_STALE_MS} already): crashed workers, each with an id of its own, do not
 * pile up in it.
 */
export const WORKER_FORGET_AFTER_MS = 10 * 60_000;

// Redis's clock, in milliseconds: heartbeats and the count of live workers agree whatever the
// clocks of the hosts that write and read them say (as the rate limiter does).
const NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";

/** KEYS[1] the registry, ARGV[1] the worker id, ARGV[2] WORKER_FORGET_AFTER_MS. */
const BEAT_LUA = `${NOW}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return now`;

/** KEYS[1] the registry, ARGV[1] WORKER_HEARTBEAT_STALE_MS. */
const COUNT_LUA = `${NOW}
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')`;

/** Records a heartbeat of `workerId` at Redis's time, and forgets workers silent for {@link WORKER_FORGET_AFTER_MS}. */
export async function recordWorkerHeartbeat(redis: Redis, prefix: string, workerId: string): Promise<void> {
  await redis.eval(BEAT_LUA, 1, workersKey(prefix), workerId, WORKER_FORGET_AFTER_MS);
}

/** Workers whose last heartbeat is at most {@link WORKER_HEARTBEAT_STALE_MS} old by Redis's clock. */
export async function countLiveWorkers(redis: Redis, prefix: string): Promise<number> {
  return Number(await redis.eval(COUNT_LUA, 1, workersKey(prefix), WORKER_HEARTBEAT_STALE_MS));
}

/** KEYS[1] the registry, ARGV[1] WORKER_HEARTBEAT_STALE_MS, ARGV[2] a worker id, ARGV[3] a prefix of worker ids ("" for none). */
const LIVE_ONE_LUA = `${NOW}
local since = now - tonumber(ARGV[1])
if ARGV[2] ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
  return (score and tonumber(score) >= since) and 1 or 0
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf')
for _, id in ipairs(live) do
  if string.sub(id, 1, #ARGV[3]) == ARGV[3] then return 1 end
end
return 0`;

/**
 * Whether the worker `worker.id`, or one whose id starts with `worker.idPrefix` (a host's workers
 * when ids are the host name and a random suffix), beat within {@link WORKER_HEARTBEAT_STALE_MS}
 * by Redis's clock: a container's health check, which must not take another host's worker for its own.
 */
export async function isWorkerLive(redis: Redis, prefix: string, worker: { id: string } | { idPrefix: string }): Promise<boolean> {
  const [id, idPrefix] = "id" in worker ? [worker.id, ""] : ["", worker.idPrefix];
  if (!id && !idPrefix) throw new Error("isWorkerLive needs a worker id or a non-empty id prefix");
  return Number(await redis.eval(LIVE_ONE_LUA, 1, workersKey(prefix), WORKER_HEARTBEAT_STALE_MS, id, idPrefix)) === 1;
}
