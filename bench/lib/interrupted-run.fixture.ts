/**
 * A harness in miniature for cleanup.test.ts, shaped as bench/run.ts: it writes Redis keys
 * under the prefix given as its second argument, registers their deletion and a slow stack stop,
 * says `ready`, and on a signal awaits that stop itself, then exits through exitAfterCleanups.
 * Usage: tsx interrupted-run.fixture.ts <redis-url> <prefix>
 */
import { Redis } from "ioredis";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { exitAfterCleanups, installSignalHandlers, onCleanup, shutdownSignal } from "./cleanup";
import { dropRedisPrefix } from "./env";

const [redisUrl, prefix] = process.argv.slice(2) as [string, string];

async function main(): Promise<void> {
  installSignalHandlers();
  // Deleting keys takes round trips; the pause makes it outlast the stop every time.
  onCleanup("redis keys", async () => void (await sleep(300), await dropRedisPrefix(redisUrl, prefix)));
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= sleep(200));
  const unregister = onCleanup("stack", stop);
  const redis = new Redis(redisUrl);
  await redis.mset(`${prefix}:a`, "1", `${prefix}:b`, "2");
  redis.disconnect();
  // The stack's processes keep the harness alive until it exits.
  const alive = setInterval(() => {}, 60_000);
  process.stdout.write("ready\n");
  await once(shutdownSignal, "abort");
  await stop();
  unregister();
  clearInterval(alive);
}

main()
  .catch((err) => {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exitCode = 1;
  })
  .finally(exitAfterCleanups);
