import type { Logger } from "@agentrun/logger";
import { createPrisma, warmUp } from "@agentrun/db";
import { closeRedis, createRedis } from "@agentrun/redis";
import { SubscriberHub } from "@agentrun/events";
import { createRunQueue } from "@agentrun/queue";
import type { GatewayConfig } from "./config";
import type { GatewayDeps } from "./deps";
import { AuthCache } from "./auth/auth-cache";
import { createMemoryClient } from "@agentrun/memory-client";
import { SlidingWindowLimiter } from "./rate-limit/sliding-window-limiter";

/** Opens the gateway's connections; `close` releases them in order. */
export function createGatewayDeps(config: GatewayConfig, logger: Logger): { deps: GatewayDeps; close: () => Promise<void> } {
  const onError = (err: Error, role: string) => logger.warn({ err: err.message, role }, "redis connection error");
  const prisma = createPrisma({ databaseUrl: config.DATABASE_URL, poolSize: config.DB_POOL_SIZE, preparedStatements: config.DB_PREPARED_STATEMENTS, queryTimeoutMs: config.DB_QUERY_TIMEOUT_MS, onPoolError: (err) => logger.warn({ err: err.message }, "database pool error") });
  warmUp(prisma);
  const redis = createRedis({ url: config.REDIS_URL, role: "commands", onError, name: "gateway" });
  const subscriber = createRedis({ url: config.REDIS_URL, role: "subscriber", onError, name: "gateway" });
  const bull = createRedis({ url: config.REDIS_URL, role: "bullmq", onError, name: "gateway" });
  const queue = createRunQueue({ connection: bull, redisPrefix: config.REDIS_PREFIX });
  queue.on("error", (err) => logger.warn({ err: err.message }, "queue error"));
  const auth = new AuthCache(prisma, config.AUTH_CACHE_TTL_MS);
  const flushTimer = setInterval(() => void auth.flushLastUsed().catch((err) => logger.warn({ err: err.message }, "could not record key use")), config.KEY_LAST_USED_FLUSH_MS);
  flushTimer.unref();
  const memory = createMemoryClient({ baseUrl: config.MEMORY_URL, token: config.INTERNAL_TOKEN, timeoutMs: config.MEMORY_TIMEOUT_MS });
  const deps: GatewayDeps = { config, logger, prisma, redis, hub: new SubscriberHub(subscriber), queue, auth, memory, limiter: new SlidingWindowLimiter(redis) };

  const close = async () => {
    clearInterval(flushTimer);
    await auth.flushLastUsed().catch(() => {});
    await queue.close().catch(() => {});
    await Promise.all([closeRedis(redis), closeRedis(subscriber), closeRedis(bull)]);
    await prisma.$disconnect();
  };
  return { deps, close };
}
