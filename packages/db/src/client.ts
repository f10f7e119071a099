import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client";
import { statementNames } from "./statement-names";

export interface CreatePrismaOptions {
  databaseUrl: string;
  /**
   * Maximum pool connections.
   * @defaultValue 10
   */
  poolSize?: number;
  /** Called on errors of idle pool clients (e.g. the server restarting), which pg would otherwise throw. */
  onPoolError?: (err: Error) => void;
  /**
   * Run statements as named prepared statements, parsed and planned once per connection (see
   * {@link statementNames}). Turn off behind a connection pooler in transaction mode that does
   * not track prepared statements (PgBouncer before 1.21).
   * @defaultValue true
   */
  preparedStatements?: boolean;
}

/**
 * Creates the Prisma client on the pg driver adapter. Connection attempts time out quickly so
 * that requests answer 503 while PostgreSQL is down instead of hanging.
 */
export function createPrisma({ databaseUrl, poolSize = 10, onPoolError, preparedStatements = true }: CreatePrismaOptions): PrismaClient {
  const adapter = new PrismaPg(
    { connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 2000, idleTimeoutMillis: 30_000 },
    { onPoolError: onPoolError ?? (() => {}), ...(preparedStatements ? { statementNameGenerator: statementNames() } : {}) },
  );
  return new PrismaClient({ adapter });
}

export type { PrismaClient };
