import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client";
import { withSessionSettings } from "./session-options";
import { statementNames } from "./statement-names";
import { checkSchemaOnOwnConnection } from "./schema-state";

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
 *
 * Every connection's session runs in UTC, whatever the server's or database's TimeZone setting:
 * the adapter sends dates without an offset and relabels the offset of those it reads without
 * converting them, so in another zone a time written by SQL (`now()`) and read through the client,
 * or written through the client and read as text, would come out shifted by the zone's offset.
 */
export function createPrisma({ databaseUrl, poolSize = 10, onPoolError, preparedStatements = true, queryTimeoutMs = 5000 }: CreatePrismaOptions): PrismaClient {
  const adapter = new PrismaPg(
    {
      connectionString: withSessionSettings(databaseUrl, { TimeZone: "UTC" }),
      max: poolSize,
      connectionTimeoutMillis: 2000,
      idleTimeoutMillis: 30_000,
      query_timeout: queryTimeoutMs,
    },
    { onPoolError: onPoolError ?? (() => {}), ...(preparedStatements ? { statementNameGenerator: statementNames() } : {}) },
  );
  const prisma = new PrismaClient({ adapter });
  // Readiness and the workers' heartbeat check the database without waiting in this pool.
  checkSchemaOnOwnConnection(prisma, databaseUrl);
  return prisma;
}

export type { PrismaClient };

/**
 * Starts the query engine and opens a first connection in the background, so that a service's
 * first request does not pay for them (about half a second here, several under load: past the
 * gateway's wait for the memory service, say). A failure (PostgreSQL not up yet) is left to the
 * requests, which retry the connection as always.
 */
export function warmUp(prisma: PrismaClient): void {
  void prisma.organization.findUnique({ where: { id: "" }, select: { id: true } }).catch(() => {});
}
