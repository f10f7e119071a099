import { z } from "zod";
import { databaseUrl, envBoolean, internalToken, logLevel, port, redisPrefix, redisUrl } from "@agentrun/config";

/** The gateway's environment. */
export const gatewayConfigSchema = z.object({
  PORT: port(3000),
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: redisPrefix,
  LOG_LEVEL: logLevel,
  MEMORY_URL: z.string().url().default("http://127.0.0.1:3002"),
  INTERNAL_TOKEN: internalToken,
  /** Longest wait for the memory service before answering 503. */
  MEMORY_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
  /** How long `stream: false` waits for the end of a run before answering 202. */
  RUN_WAIT_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  /** Interval of the SSE keepalive comment. */
  SSE_HEARTBEAT_MS: z.coerce.number().int().positive().default(15_000),
  /** How long a looked-up API key or agent is trusted; bounds how late a revocation takes effect. */
  AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(1000).default(900),
  /** Largest accepted request body. */
  BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(1024 * 1024),
  REQUIRE_HTTPS: envBoolean.default(false),
  /** Express `trust proxy` setting: false, true, a hop count, or a comma-separated list of addresses. */
  TRUST_PROXY: z.string().default("false"),
  /** On SIGTERM, how long open streams may stay before they are cut. */
  SHUTDOWN_STREAM_GRACE_MS: z.coerce.number().int().min(0).default(2000),
  DB_POOL_SIZE: z.coerce.number().int().positive().default(10),
});

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
