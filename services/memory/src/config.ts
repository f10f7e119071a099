import { z } from "zod";
import { databaseUrl, dbPreparedStatements, internalToken, logLevel, ownPort, port } from "@agentrun/config";

/** The memory service's environment; parsed once in index.ts. */
export const memoryConfigSchema = z.object({
  /** The port; wins over PORT, which an environment exported for the whole stack sets for the gateway. */
  MEMORY_PORT: ownPort,
  /** @defaultValue 3002 */
  PORT: port(3002),
  DATABASE_URL: databaseUrl,
  /** Shared secret the gateway and the worker present as `Authorization: Bearer …`. */
  INTERNAL_TOKEN: internalToken,
  LOG_LEVEL: logLevel,
  /**
   * Maximum PostgreSQL pool connections.
   * @defaultValue 10
   */
  DB_POOL_SIZE: z.coerce.number().int().positive().default(10),
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
  /** `production` makes a published INTERNAL_TOKEN a start-up warning. @defaultValue "development" */
  NODE_ENV: z.string().default("development"),
});

export type MemoryConfig = z.infer<typeof memoryConfigSchema>;

/** INTERNAL_TOKEN's default, published with the code. */
const DEFAULT_INTERNAL_TOKEN = internalToken.parse(undefined);

/**
 * Whether INTERNAL_TOKEN is a published value: the default, or a `change-me…` placeholder such as
 * docker-compose.yml's. Whoever knows it can read and change every memory through the internal API.
 */
export function isPublishedInternalToken(token: string): boolean {
  return token === DEFAULT_INTERNAL_TOKEN || token.startsWith("change-me");
}

/** What index.ts logs as warnings at start-up. */
export function startupWarnings(config: Pick<MemoryConfig, "NODE_ENV" | "INTERNAL_TOKEN">): string[] {
  if (config.NODE_ENV !== "production" || !isPublishedInternalToken(config.INTERNAL_TOKEN)) return [];
  return ["INTERNAL_TOKEN is a published default: anyone who reaches the memory service can read and change every memory; set a long random value"];
}
