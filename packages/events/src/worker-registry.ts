import { randomBytes } from "node:crypto";
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

/** Hex characters after the host name in a worker id the worker makes itself ({@link newWorkerId}). */
const WORKER_ID_SUFFIX_CHARS = 8;

/** A worker id for a process on `host`: the host name, a dash and {@link WORKER_ID_SUFFIX_CHARS} hex characters. */
export function newWorkerId(host: string): string {
  return `${host}-${randomBytes(WORKER_ID_SUFFIX_CHARS / 2).toString("hex")}`;
}

/**
 * KEYS[1] the registry, ARGV[1] WORKER_HEARTBEAT_STALE_MS, ARGV[2] a worker id, ARGV[3] a host
 * name ("" for none): with a host, ids of {@link newWorkerId}'s form for that host match.
 */
const LIVE_ONE_LUA = `${NOW}
local since = now - tonumber(ARGV[1])
if ARGV[2] ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
  return (score and tonumber(score) >= since) and 1 or 0
end
local head = ARGV[3] .. '-'
local live = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf')
for _, id in ipairs(live) do
  if #id == #head + ${WORKER_ID_SUFFIX_CHARS} and string.sub(id, 1, #head) == head and string.find(string.sub(id, #head + 1), '^%x+$') then return 1 end
end
return 0`;

/**
 * Whether the worker `worker.id`, or one with an id {@link newWorkerId} made on `worker.host`,
 * beat within {@link WORKER_HEARTBEAT_STALE_MS} by Redis's clock: a container's health check,
 * which must not take another host's worker for its own (host `worker` is not host `worker-2`).
 */
export async function isWorkerLive(redis: Redis, prefix: string, worker: { id: string } | { host: string }): Promise<boolean> {
  const [id, host] = "id" in worker ? [worker.id, ""] : ["", worker.host];
  if (!id && !host) throw new Error("isWorkerLive needs a worker id or a host name");
  return Number(await redis.eval(LIVE_ONE_LUA, 1, workersKey(prefix), WORKER_HEARTBEAT_STALE_MS, id, host)) === 1;
}
