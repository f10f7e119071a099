import type Redis from "ioredis";
import { runHeartbeatKey, runLogKey } from "./keys";

/** Runs per UNLINK (two keys each): small enough for one command, however many runs a task held. */
const RUNS_PER_COMMAND = 500;

/**
 * Removes the event logs and heartbeats of these runs (a deleted task's), a bounded number of
 * keys per command. Their writer keys and cancel flags stay until they expire: they are what
 * keeps out a worker cut off from Redis that still executes one of them (the delete ended it
 * without that worker), should it come back. Spreading a task's 100,000
 * run ids into one call overflowed the call stack inside ioredis's auto-pipelining and left its
 * pipeline broken, which crashed the process a tick later.
 */
export async function removeRunKeys(redis: Redis, redisPrefix: string, runIds: readonly string[]): Promise<void> {
  for (let start = 0; start < runIds.length; start += RUNS_PER_COMMAND) {
    const keys = runIds
      .slice(start, start + RUNS_PER_COMMAND)
      .flatMap((id) => [runLogKey(redisPrefix, id), runHeartbeatKey(redisPrefix, id)]);
    await redis.unlink(...keys);
  }
}
