import type Redis from "ioredis";
import { runCancelKey, runHeartbeatKey, runLogKey, runWriterKey } from "./keys";

/** Runs per UNLINK (four keys each): small enough for one command, however many runs a task held. */
const RUNS_PER_COMMAND = 250;

/**
 * Removes what Redis holds of these runs (a deleted task's): their event logs, writer keys,
 * cancel flags and heartbeats, a bounded number of keys per command: spreading a task's 100,000
 * run ids into one call overflowed the call stack inside ioredis's auto-pipelining and left its
 * pipeline broken, which crashed the process a tick later.
 */
export async function removeRunKeys(redis: Redis, redisPrefix: string, runIds: readonly string[]): Promise<void> {
  for (let start = 0; start < runIds.length; start += RUNS_PER_COMMAND) {
    const keys = runIds
      .slice(start, start + RUNS_PER_COMMAND)
      .flatMap((id) => [runLogKey(redisPrefix, id), runWriterKey(redisPrefix, id), runCancelKey(redisPrefix, id), runHeartbeatKey(redisPrefix, id)]);
    await redis.unlink(...keys);
  }
}
