import type Redis from "ioredis";
import { runLogKey } from "./keys";

/** Keys per UNLINK: small enough for one command, however many runs a task held. */
const KEYS_PER_COMMAND = 1000;

/**
 * Removes the Redis event logs of these runs (a deleted task's), a bounded number of keys per
 * command: spreading a task's 100,000 run ids into one call overflowed the call stack inside
 * ioredis's auto-pipelining and left its pipeline broken, which crashed the process a tick later.
 */
export async function removeRunLogs(redis: Redis, redisPrefix: string, runIds: readonly string[]): Promise<void> {
  for (let start = 0; start < runIds.length; start += KEYS_PER_COMMAND) {
    const keys = runIds.slice(start, start + KEYS_PER_COMMAND).map((id) => runLogKey(redisPrefix, id));
    await redis.unlink(...keys);
  }
}
