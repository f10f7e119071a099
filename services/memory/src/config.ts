import { z } from "zod";
import { DEV_INTERNAL_TOKEN, databaseUrl, dbPreparedStatements, dbQueryTimeoutMs, envInteger, internalToken, isPublishedSecret, listenHost, logLevel, ownPort, port } from "@agentrun/config";

/** The memory service's environment; parsed once in index.ts. */
export const memoryConfigSchema = z.object({
  /** The port; wins over PORT, which an environment exported for the whole stack sets for the gateway. */
  MEMORY_PORT: ownPort,
  /** @defaultValue 3002 */
  PORT: port(3002),
  /** The address to listen on. @defaultValue every interface */
  MEMORY_HOST: listenHost,
  DATABASE_URL: databaseUrl,
  /** Shared secret the gateway and the worker present as `Authorization: Bearer …`. */
  INTERNAL_TOKEN: internalToken,
  LOG_LEVEL: logLevel,
  /**
   * Maximum PostgreSQL pool connections.
   * @defaultValue 10
   */
  DB_POOL_SIZE: envInteger(1).default(10),
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
  DB_QUERY_TIMEOUT_MS: dbQueryTimeoutMs,
  /** `production` makes a published INTERNAL_TOKEN a start-up warning. @defaultValue "development" */
  NODE_ENV: z.string().default("development"),
});

export type MemoryConfig = z.infer<typeof memoryConfigSchema>;

/** Whether the service listens on the loopback interface only (`MEMORY_HOST`; unset: every interface). */
const loopbackOnly = (host: string | undefined) => host !== undefined && /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i.test(host);

/**
 * What index.ts logs as warnings at start-up: an INTERNAL_TOKEN that is published (see
 * `isPublishedSecret`), with which anyone who reaches the service can read and change every
 * memory, in production or wherever the service listens beyond the loopback interface.
 */
export function startupWarnings(config: Pick<MemoryConfig, "NODE_ENV" | "INTERNAL_TOKEN" | "MEMORY_HOST">): string[] {
  if (!isPublishedSecret(config.INTERNAL_TOKEN, DEV_INTERNAL_TOKEN)) return [];
  if (config.NODE_ENV !== "production" && loopbackOnly(config.MEMORY_HOST)) return [];
  return ["INTERNAL_TOKEN is a published default: anyone who reaches the memory service can read and change every memory; set a long random value"];
}
