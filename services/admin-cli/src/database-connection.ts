import { withSessionSettings } from "@agentrun/db";

/**
 * How the CLI connects to PostgreSQL. A statement that waits on a lock or on a busy server is
 * cancelled by PostgreSQL itself after {@link STATEMENT_TIMEOUT_MS}, which rolls it back. A
 * statement only abandoned by the client (pg's query timeout) could still be carried out once
 * the lock is released, after the CLI has reported a failure. Every command writes with one
 * statement or one transaction, so a cancelled statement means nothing was changed.
 */

/**
 * Longest time PostgreSQL runs one statement of the CLI, waits on locks included. Below the 5 s
 * that Prisma gives an interactive transaction, so that a transaction stuck on a lock ends with
 * the server's cancellation rather than Prisma's expiry.
 * @defaultValue 4000
 */
export const STATEMENT_TIMEOUT_MS = 4000;

/**
 * Longest wait for the server's answer to one statement, past {@link STATEMENT_TIMEOUT_MS}: it
 * is reached only by a server that does not answer at all.
 * @defaultValue 6000
 */
export const QUERY_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + 2000;

/**
 * `databaseUrl` with `-c statement_timeout=…` added to its `options` parameter (the command-line
 * options PostgreSQL applies to the session), after any options it already has so that the
 * CLI's timeout is the one in force.
 */
export function withStatementTimeout(databaseUrl: string, timeoutMs = STATEMENT_TIMEOUT_MS): string {
  return withSessionSettings(databaseUrl, { statement_timeout: timeoutMs });
}
