import type { Redis } from "@agentrun/redis";

/** KEYS[1] the run's heartbeat; ARGV[1] the worker that must hold it, ARGV[2] the new TTL in ms. */
const RENEW_IF_HELD_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/**
 * Gives a run's heartbeat a whole `ttlMs` again if `workerId` still holds it, in one step: a
 * worker that set it over this one meanwhile keeps it. False when it is someone else's or gone.
 */
export async function renewRunHeartbeatIfHeld(redis: Redis, hbKey: string, workerId: string, ttlMs: number): Promise<boolean> {
  return (await redis.eval(RENEW_IF_HELD_LUA, 1, hbKey, workerId, Math.max(1, Math.round(ttlMs)))) === 1;
}

/** KEYS[1] the run's heartbeat; ARGV[1] the worker that must hold it. */
const RELEASE_IF_HELD_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`;

/** Deletes a run's heartbeat if `workerId` holds it, in one step; false when it is someone else's or gone. */
export async function releaseRunHeartbeatIfHeld(redis: Redis, hbKey: string, workerId: string): Promise<boolean> {
  return (await redis.eval(RELEASE_IF_HELD_LUA, 1, hbKey, workerId)) === 1;
}
