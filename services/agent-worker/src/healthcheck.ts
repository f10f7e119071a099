/**
 * The worker container's health check (docker-compose.yml): exits 0 while this host's worker
 * beats (its WORKER_ID, or an id made of this host name and a random suffix, as the worker makes
 * one), 1 otherwise. Another host's live worker does not count, and ages are read on Redis's clock.
 */
import { hostname } from "node:os";
import { loadConfig } from "@agentrun/config";
import { isWorkerLive } from "@agentrun/events";
import { closeRedis, createRedis } from "@agentrun/redis";
import { workerConfigSchema } from "./config";

const config = loadConfig(workerConfigSchema);
const redis = createRedis({ url: config.REDIS_URL, role: "commands", onError: () => {} });
const worker = config.WORKER_ID ? { id: config.WORKER_ID } : { host: hostname() };
isWorkerLive(redis, config.REDIS_PREFIX, worker)
  .then(
    (live) => {
      if (!live) process.stderr.write(`no fresh heartbeat of ${"id" in worker ? worker.id : `a worker of host ${worker.host}`}\n`);
      process.exitCode = live ? 0 : 1;
    },
    (err: Error) => {
      process.stderr.write(`health check failed: ${err.message}\n`);
      process.exitCode = 1;
    },
  )
  .finally(() => closeRedis(redis));
