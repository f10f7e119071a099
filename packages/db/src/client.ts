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
  /**
   * Longest wait for the answer to one statement. pg then fails the query ("Query read timeout")
   * and the connection goes on once the server answers the abandoned one.
   * @defaultValue 5000
   */
  queryTimeoutMs?: number;
}

/**
 * Creates the Prisma client on the pg driver adapter. Connection attempts and statements time out,
 * so that requests answer 503 while PostgreSQL is down or not answering instead of hanging.
 */
export function createPrisma({ databaseUrl, poolSize = 10, onPoolError, preparedStatements = true, queryTimeoutMs = 5000 }: CreatePrismaOptions): PrismaClient {
  const adapter = new PrismaPg(
    { connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 2000, idleTimeoutMillis: 30_000, query_timeout: queryTimeoutMs },
    { onPoolError: onPoolError ?? (() => {}), ...(preparedStatements ? { statementNameGenerator: statementNames() } : {}) },
  );
  return new PrismaClient({ adapter });
}

export type { PrismaClient };
