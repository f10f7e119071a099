/**
 * The one line an operator sees for a database failure. Prisma's own messages span many lines
 * (the invocation, a source excerpt, then the cause); none of that reaches the terminal.
 */
import { driverCauseOf, isQueryTimeoutError, isTooManyConnectionsError, isUnavailableError, sqlStateOf } from "@agentrun/errors";
import { QUERY_TIMEOUT_MS, STATEMENT_TIMEOUT_MS } from "./database-connection";

/** Database errors that mean DATABASE_URL names the wrong database or one not migrated yet. */
const SCHEMA_PROBLEMS: Record<string, string> = {
  "3D000": "error: the database named in DATABASE_URL does not exist (create it, then run `npm run db:migrate:deploy`)",
  "42P01": "error: the database is not migrated (run `npm run db:migrate:deploy`)",
  "42703": "error: the database is not migrated to this version (run `npm run db:migrate:deploy`)",
  "42883": "error: the database is not migrated to this version (run `npm run db:migrate:deploy`)",
};

/** SQLSTATEs of a refused login: unknown role or no pg_hba.conf entry (28000), wrong password (28P01). */
const LOGIN_REFUSED = ["28000", "28P01"];

/** Prisma's code for an interactive transaction that expired or could not start in time. */
const PRISMA_TRANSACTION_EXPIRED = "P2028";

/** The server cancelled the statement (see `database-connection.ts`), so it was rolled back. */
const BUSY = `error: the database did not answer within ${STATEMENT_TIMEOUT_MS / 1000} s (busy or locked); nothing was changed`;

/** Prisma gave up on the transaction, which is then rolled back. */
const TRANSACTION_EXPIRED = "error: the database did not finish the transaction in time (busy or locked); nothing was changed";

/**
 * Prisma could not start the transaction: no connection was had in time (a server that accepts
 * connections but does not answer them, or one out of reach), so nothing was sent.
 */
const TRANSACTION_NOT_STARTED = "error: the database is unreachable or not answering (no connection within the wait for a transaction; check DATABASE_URL); nothing was changed";

/** The server sent nothing back: a statement may still be carried out, or may have been. */
const NOT_ANSWERING = `error: the database stopped answering (no reply within ${QUERY_TIMEOUT_MS / 1000} s); check whether the command took effect before retrying`;

const UNREACHABLE = "error: the database is unreachable (check DATABASE_URL; start it with `docker compose up -d postgres`)";
const TOO_MANY_CONNECTIONS = "error: the database refused the connection: too many connections (its max_connections, or the limit of this user or database); retry once others have closed";

const TLS_REFUSED = "error: the database does not accept TLS connections (check sslmode in DATABASE_URL)";

function text(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** True for Prisma's errors, which all carry the client's version. */
function isPrismaError(err: unknown): err is Error {
  return err instanceof Error && "clientVersion" in err;
}

/**
 * The meaningful part of a Prisma error: the driver's own message when there is one, otherwise
 * the last line of Prisma's message, which states the cause below the invocation and excerpt.
 */
function prismaMessageOf(err: Error): string {
  const cause = driverCauseOf(err);
  const fromDriver = text(cause?.originalMessage) ?? text(cause?.message) ?? text(cause?.reason);
  if (fromDriver) return fromDriver;
  const lines = err.message.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  return lines.at(-1) ?? text(cause?.kind) ?? "unexpected database failure";
}

/**
 * The line for an error raised by the database or its client, or `undefined` for any other
 * error. Starts with `error: `; a server's message is quoted as it is, so fold it onto one line.
 */
export function databaseErrorLine(err: unknown): string | undefined {
  const sqlState = sqlStateOf(err) ?? "";
  const cause = driverCauseOf(err);
  // pg's query timeout also counts as unavailable, so it is told apart first.
  if (isQueryTimeoutError(err)) return NOT_ANSWERING;
  if (sqlState === "55P03" || (sqlState === "57014" && /timeout/i.test(text(cause?.originalMessage) ?? ""))) return BUSY;
  if ((err as { code?: unknown } | null)?.code === PRISMA_TRANSACTION_EXPIRED) {
    return /unable to start a transaction/i.test((err as Error).message) ? TRANSACTION_NOT_STARTED : TRANSACTION_EXPIRED;
  }
  if (cause?.kind === "TlsConnectionError") {
    const reason = text(cause.reason) ?? "";
    if (/does not support SSL/i.test(reason)) return TLS_REFUSED;
    return `error: the TLS connection to the database failed (${reason || "no reason given"}; check sslmode in DATABASE_URL)`;
  }
  // Counted as unavailable too, but it is not unreachable: say what it is.
  if (isTooManyConnectionsError(err)) return TOO_MANY_CONNECTIONS;
  if (isUnavailableError(err)) return UNREACHABLE;
  if (LOGIN_REFUSED.includes(sqlState)) {
    return `error: the database refused the login in DATABASE_URL (${text(cause?.originalMessage) ?? "check its user name and password"})`;
  }
  const schemaProblem = SCHEMA_PROBLEMS[sqlState];
  if (schemaProblem) return schemaProblem;
  if (isPrismaError(err)) return `error: database failure: ${prismaMessageOf(err)}`;
  return undefined;
}
