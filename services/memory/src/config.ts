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
});

export type MemoryConfig = z.infer<typeof memoryConfigSchema>;
