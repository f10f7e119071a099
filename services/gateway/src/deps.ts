import type { Logger } from "@agentrun/logger";
import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import type { SubscriberHub } from "@agentrun/events";
import type { AgentRunJob, Queue } from "@agentrun/queue";
import type { GatewayConfig } from "./config";
import type { AuthCache } from "./auth/auth-cache";
import type { MemoryClient } from "@agentrun/memory-client";
import type { SlidingWindowLimiter } from "./rate-limit/sliding-window-limiter";

/** Everything the gateway's routes use, created once in index.ts (or by a test). */
export interface GatewayDeps {
  config: GatewayConfig;
  logger: Logger;
  prisma: PrismaClient;
  /** Command connection. */
  redis: Redis;
  hub: SubscriberHub;
  queue: Queue<AgentRunJob>;
  auth: AuthCache;
  /** Client of the memory service's internal API. */
  memory: MemoryClient;
  /** Sliding-window request counter in Redis (60 s), shared by every gateway instance. */
  limiter: SlidingWindowLimiter;
}
