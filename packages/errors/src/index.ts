import type { ZodError } from "zod";
import { sqlStateOf } from "./sql-state";

export { driverCauseOf, sqlStateOf, type DriverCause } from "./sql-state";

/**
 * Error codes of the public API and their HTTP status. Every failure that reaches a client is an
 * {@link AppError}; anything else is reported as a generic `internal_error`.
 */

/** One table from code to HTTP status (see the API contract). */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  https_required: 403,
  agent_not_found: 404,
  task_not_found: 404,
  run_not_found: 404,
  memory_not_found: 404,
  not_found: 404,
  run_in_progress: 409,
  idempotency_conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface AppErrorOptions {
  message?: string;
  /** Overrides the status from {@link ERROR_STATUS}. */
  status?: number;
  /** Extra machine-readable detail, e.g. the list of invalid fields. */
  details?: unknown;
  /** Response headers to add, e.g. Retry-After. */
  headers?: Record<string, string>;
  cause?: unknown;
}

const DEFAULT_MESSAGES: Record<ErrorCode, string> = {
  invalid_request: "The request is invalid.",
  unauthorized: "A valid API key is required.",
  insufficient_credits: "The organization has no credits left.",
  forbidden: "This key has no access to the resource.",
  https_required: "Requests must be sent over HTTPS.",
  agent_not_found: "No agent has this id.",
  task_not_found: "No task has this id.",
  run_not_found: "No run has this id.",
  memory_not_found: "No memory entry has this id.",
  not_found: "Not found.",
  run_in_progress: "The task already has a run in progress.",
  idempotency_conflict: "This Idempotency-Key was used with a different request.",
  payload_too_large: "The request body is too large.",
  unsupported_media_type: "Request bodies must be application/json.",
  rate_limited: "Too many requests.",
  internal_error: "An unexpected error occurred.",
  unavailable: "A dependency is unavailable; retry shortly.",
};

export class AppError extends Error {
  override name = "AppError";
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: unknown;
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, opts: AppErrorOptions = {}) {
    super(opts.message ?? DEFAULT_MESSAGES[code], { cause: opts.cause });
    this.code = code;
    this.status = opts.status ?? ERROR_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers;
  }
}

/** Why a Bearer-authenticated request was refused, as RFC 6750 names it (none: no credentials were sent). */
export type BearerProblem = "invalid_request" | "invalid_token" | null;

/**
 * 401 `unauthorized` for a route authenticated with `Authorization: Bearer …`, with the challenge
 * RFC 9110 requires of every 401 (`WWW-Authenticate` in RFC 6750's Bearer scheme): no `error`
 * attribute when no credentials were sent, `invalid_request` for a malformed or repeated header,
 * `invalid_token` for a token that is unknown, revoked or wrong.
 */
export function bearerRefusal(realm: string, problem: BearerProblem, opts: Pick<AppErrorOptions, "message" | "details"> = {}): AppError {
  const challenge = problem ? `Bearer realm="${realm}", error="${problem}"` : `Bearer realm="${realm}"`;
  return new AppError("unauthorized", { ...opts, headers: { "WWW-Authenticate": challenge } });
}

/** 400 `invalid_request` for one field (of the body, the query or the headers) that `message` says is wrong, named in its details as validation names fields. */
export function fieldRefused(path: string, message: string): AppError {
  return new AppError("invalid_request", { message, details: [{ path, message }] });
}

/**
 * Client errors that Express and its helpers raise with an HTTP status (http-errors, the router's
 * URIError for a malformed escape in a path parameter) as contract errors; null for any other.
 */
export function fromHttpStatus(err: any): AppError | null {
  const status = Number(err?.status ?? err?.statusCode);
  if (!(err instanceof URIError || err?.expose === true) || !(status >= 400 && status < 500)) return null;
  if (status === 404) return new AppError("not_found");
  if (status === 413) return new AppError("payload_too_large");
  if (status === 415) return new AppError("unsupported_media_type");
  return new AppError("invalid_request", { message: err instanceof URIError ? "The URL contains a malformed percent-encoding." : "The request could not be understood." });
}

/**
 * `text` as an error message repeats it: whole up to `max` UTF-16 units, else cut there (one
 * earlier rather than split a surrogate pair, which strict JSON parsers refuse) and marked `…`.
 */
export function echoed(text: string, max = 100): string {
  if (text.length <= max) return text;
  const end = /[\ud800-\udbff]/.test(text[max - 1]!) ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

/** The contract's error body. */
export interface ErrorBody {
  error: { code: string; message: string; details?: unknown };
}

export function errorBody(code: string, message: string, details?: unknown): ErrorBody {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}

/**
 * True for a statement PostgreSQL did not answer within the pool's query timeout: unlike a
 * refused connection, it was sent, and the server may still carry it out once it answers again.
 */
export function isQueryTimeoutError(err: unknown): boolean {
  for (const e of causeChain(err)) if (/Query read timeout/.test(String(e.message ?? ""))) return true;
  return false;
}

/**
 * True when a statement may have been carried out although its caller got an error: PostgreSQL
 * did not answer it in time, or its connection was lost after it was sent (a commit whose answer
 * never arrived). False for a refusal by PostgreSQL (the statement was rolled back), for a bug,
 * and for a failure to get a connection at all: then nothing was sent.
 */
export function mayHaveBeenCarriedOut(err: unknown): boolean {
  return isQueryTimeoutError(err) || (isUnavailableError(err) && !isConnectFailure(err));
}

/**
 * Codes (Node's, PostgreSQL's SQLSTATE, Prisma's) of a failure to get a connection: nothing was
 * sent. 53300 is too many connections (the server's, or a role's or database's limit), which
 * Prisma's adapter reports as P2037: no connection now, as when the server is down.
 */
const CONNECT_FAILURE_CODES = ["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "EMFILE", "ENFILE", "57P03", "53300", "P1001", "P2024", "P2037"];
/** Codes of a connection lost, cut or timed out once open. */
const LOST_CONNECTION_CODES = ["ECONNRESET", "ETIMEDOUT", "EPIPE", "57P01", "57P02", "08006", "08001", "08003", "P1002", "P1017"];

/** Whether `e` (one error, not its causes) carries one of `codes`, as its code or its SQLSTATE. */
const hasCode = (e: any, codes: string[]) => codes.includes(String(e.code ?? "")) || codes.includes(sqlStateOf(e) ?? "");

/** An outage met while getting a connection, before any statement was sent. */
function isConnectFailure(err: unknown): boolean {
  for (const e of causeChain(err)) {
    if (hasCode(e, CONNECT_FAILURE_CODES)) return true;
    const msg = `${String(e.message ?? "")} ${String(e.cause?.message ?? "")}`;
    if (/connect E[A-Z]+|timeout exceeded when trying to connect|Can't reach database|DatabaseNotReachable|not yet accepting connections|the database system is starting up|too many (connections|clients)/i.test(msg)) return true;
  }
  return false;
}

/**
 * True when an HTTP request's connection broke once it was open (reset, closed by the other
 * side): the request may have been received and carried out. False for a failure to connect or
 * to resolve the name, a refused redirect, a timeout: nothing shows that a request got through.
 */
export function isConnectionLostError(err: unknown): boolean {
  for (const e of causeChain(err)) {
    if (hasCode(e, ["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"])) return true;
    if (/other side closed|socket hang up/i.test(String(e.message ?? ""))) return true;
  }
  return false;
}

/**
 * PostgreSQL does not have a table, column, function or type the code uses (SQLSTATE 42P01,
 * 42703, 42883, 42704; Prisma's P2021, P2022): the database is not migrated to this version (a
 * deployment started before its migrations ran, or on another database). Requests then get 503,
 * as in an outage, rather than 500: the service is not ready, and readiness says why.
 */
export function isSchemaMissingError(err: unknown): boolean {
  for (const e of causeChain(err)) if (hasCode(e, ["42P01", "42703", "42883", "42704", "P2021", "P2022"])) return true;
  return false;
}

/** The answer to a request that met {@link isSchemaMissingError}. */
export const schemaMissing = (cause: unknown) =>
  new AppError("unavailable", { message: "The service's database is not migrated to this version yet; retry once it is.", cause });

/** PostgreSQL refused a connection for too many of them (SQLSTATE 53300, Prisma's P2037). */
export function isTooManyConnectionsError(err: unknown): boolean {
  for (const e of causeChain(err)) if (hasCode(e, ["53300", "P2037"])) return true;
  return false;
}

/** `err` and its causes, outermost first, each object once (a cycle of causes ends the walk). */
function* causeChain(err: unknown): Generator<any> {
  const seen = new Set<unknown>();
  for (let e: any = err; e && typeof e === "object" && !seen.has(e); e = e.cause) {
    seen.add(e);
    yield e;
  }
}

/**
 * True for errors that mean a dependency (PostgreSQL, Redis, another service) could not be
 * reached, as opposed to a bug: these become 503 `unavailable`.
 */
export function isUnavailableError(err: unknown): boolean {
  for (const e of causeChain(err)) {
    const msg = String(e.message ?? "");
    // Prisma's driver adapter keeps PostgreSQL's SQLSTATE in `meta` (e.g. P2010 → 57P03).
    if (hasCode(e, CONNECT_FAILURE_CODES) || hasCode(e, LOST_CONNECTION_CODES)) return true;
    // Out of file descriptors (EMFILE, ENFILE): this process cannot open a connection now.
    // "Command timed out": Redis (ioredis's commandTimeout) did not answer a command in time.
    if (/Connection is closed|connect E[MN]FILE|Stream isn't writeable|enableOfflineQueue|connect ECONNREFUSED|Connection terminated|DatabaseNotReachable|Can't reach database|timeout exceeded when trying to connect|the database system is (starting up|shutting down|not yet accepting connections|in recovery mode)|MaxRetriesPerRequestError|Reached the max retries|Query read timeout|^Command timed out$/i.test(msg)) return true;
    if (e.name === "DriverAdapterError" && /ECONNREFUSED|E[MN]FILE|closed|terminat/i.test(String(e.cause?.message ?? msg))) return true;
  }
  return false;
}

/**
 * One entry per invalid field of a failed parse, with its line of the error's message. Zod
 * reports the keys an object does not take as one issue at the object's own path; each is a
 * field of its own here, so that `details` names it (`stauts`, not the empty path of the query),
 * and the message quotes it (`Unrecognized key: "stauts"`, after the object's path if any).
 */
function invalidFields(err: ZodError): { path: string; message: string; text: string }[] {
  return err.issues.flatMap((i) => {
    const at = echoed(i.path.join("."));
    if (i.code !== "unrecognized_keys") return [{ path: at, message: i.message, text: `${at || "body"}: ${i.message}` }];
    return i.keys.map((key) => ({
      path: echoed([...i.path, key].join(".")),
      message: "Unrecognized key",
      text: `${at ? `${at}: ` : ""}Unrecognized key: ${JSON.stringify(echoed(key))}`,
    }));
  });
}

/** How many invalid fields a 400 names; the message counts the others. */
const FIELDS_SHOWN_MAX = 20;
// A field path or key is repeated (by `echoed`) up to 100 characters: a key can be as long as the body.

/**
 * 400 `invalid_request` for a failed zod parse of a request, naming the first
 * {@link FIELDS_SHOWN_MAX} invalid fields, in `details` and the message, and counting the rest.
 * The gateway and the memory service answer every invalid request this way.
 */
export function invalidRequest(err: ZodError): AppError {
  const all = invalidFields(err);
  const fields = all.slice(0, FIELDS_SHOWN_MAX);
  const more = all.length - fields.length;
  const message = fields.map((f) => f.text).join("; ") + (more > 0 ? `; and ${more} more invalid field${more === 1 ? "" : "s"}` : "");
  return new AppError("invalid_request", { message, details: fields.map(({ path, message }) => ({ path, message })) });
}
