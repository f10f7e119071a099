import type { Logger } from "@agentrun/logger";
import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import type { MemoryClient } from "@agentrun/memory-client";
import type { WorkerConfig } from "../config";
import type { ToolRegistry } from "../tools/registry";
import type { ModelClients } from "./model-clients";
import type { AgentCache } from "./agent-cache";
import type { ReconnectBeats } from "./reconnect-beats";

/** What executing a run needs; created once per worker process. */
export interface RunDeps {
  config: WorkerConfig;
  logger: Logger;
  prisma: PrismaClient;
  /** Command connection (event log, publish, heartbeats). */
  redis: Redis;
  redisPrefix: string;
  models: ModelClients;
  agents: AgentCache;
  tools: ToolRegistry;
  memory: MemoryClient;
  /** Lifetime of a run's heartbeat key (the job lock duration); renewed every third of it. */
  heartbeatTtlMs: number;
  /** Identifies this worker process in heartbeats. */
  workerId: string;
  /** Beats the heartbeats of the runs in progress as soon as `redis` reconnects. */
  reconnectBeats: ReconnectBeats;
}
