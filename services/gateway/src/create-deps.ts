import type { Logger } from "@agentrun/logger";
import { createPrisma, warmUp, watchDatabase } from "@agentrun/db";
import { closeRedis, createRedis, logConnectionState } from "@agentrun/redis";
import { isUnavailableError } from "@agentrun/errors";
import { SubscriberHub } from "@agentrun/events";
import { createRunQueue } from "@agentrun/queue";
import type { GatewayConfig } from "./config";
import type { GatewayDeps } from "./deps";
import { AuthCache } from "./auth/auth-cache";
import { createMemoryClient } from "@agentrun/memory-client";
import { SlidingWindowLimiter } from "./rate-limit/sliding-window-limiter";

/** Opens the gateway's connections; `close` releases them in order. */
export function createGatewayDeps(config: GatewayConfig, logger: Logger): { deps: GatewayDeps; close: () => Promise<void> } {
  // The database's outages are logged once each, with their end (the watch): a pool connection
  // that an outage broke only has the database checked, rather than a line per connection.
  const onPoolError = (err: Error) => {
    if (!isUnavailableError(err)) return logger.warn({ err: err.message }, "database pool error");
    logger.debug({ err: err.message }, "database pool connection lost");
    database.suspect();
  };
  const prisma = createPrisma({ databaseUrl: config.DATABASE_URL, poolSize: config.DB_POOL_SIZE, preparedStatements: config.DB_PREPARED_STATEMENTS, queryTimeoutMs: config.DB_QUERY_TIMEOUT_MS, onPoolError });
  const database = watchDatabase(prisma, logger);
  warmUp(prisma);
  const redis = createRedis({ url: config.REDIS_URL, role: "commands", name: "gateway" });
  const subscriber = createRedis({ url: config.REDIS_URL, role: "subscriber", name: "gateway" });
  const bull = createRedis({ url: config.REDIS_URL, role: "bullmq", name: "gateway" });
  // A Redis outage is logged once per connection when it begins and once when it ends, not at every retry.
  for (const client of [redis, subscriber, bull]) logConnectionState(client, logger);
  const queue = createRunQueue({ connection: bull, redisPrefix: config.REDIS_PREFIX });
  // The queue repeats its connection's errors, which the watch above reports.
  queue.on("error", (err) => (isUnavailableError(err) ? logger.debug({ err: err.message }, "queue: redis unreachable") : logger.warn({ err: err.message }, "queue error")));
  const auth = new AuthCache(prisma, config.AUTH_CACHE_TTL_MS);
  const flushTimer = setInterval(() => void auth.flushLastUsed().catch((err) => logger.warn({ err: err.message }, "could not record key use")), config.KEY_LAST_USED_FLUSH_MS);
  flushTimer.unref();
  const memory = createMemoryClient({ baseUrl: config.MEMORY_URL, token: config.INTERNAL_TOKEN, timeoutMs: config.MEMORY_TIMEOUT_MS });
  const deps: GatewayDeps = { config, logger, prisma, redis, hub: new SubscriberHub(subscriber), queue, auth, memory, limiter: new SlidingWindowLimiter(redis) };

  const close = async () => {
    clearInterval(flushTimer);
    database.close();
    await auth.flushLastUsed().catch(() => {});
    await queue.close().catch(() => {});
    await Promise.all([closeRedis(redis), closeRedis(subscriber), closeRedis(bull)]);
    await prisma.$disconnect();
  };
  return { deps, close };
}
