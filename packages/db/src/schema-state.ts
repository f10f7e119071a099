import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import type { PrismaClient } from "./generated/prisma/client";
import { REPO_ROOT } from "./database";

/** How the database looks to a service: reachable and migrated, or reachable without the newest migration. */
export type SchemaState = "ok" | "not_migrated";

let newest: string | undefined;

/** The name of the newest committed migration (prisma/migrations), which this code needs applied. Read once. */
export function latestMigration(): string {
  newest ??= fs
    .readdirSync(path.join(REPO_ROOT, "prisma/migrations"), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .at(-1);
  if (!newest) throw new Error("no migrations found under prisma/migrations");
  return newest;
}

const SCHEMA_STATE_SQL = `SELECT EXISTS (SELECT 1 FROM _prisma_migrations WHERE migration_name = $1 AND finished_at IS NOT NULL AND rolled_back_at IS NULL) AS applied`;

/** Longest wait for the check's own connection, and then for its statement. */
const CHECK_TIMEOUT_MS = 2000;
/** SQLSTATE too_many_connections: "sorry, too many clients already", "too many connections for role". */
const TOO_MANY_CONNECTIONS = "53300";
/** A check settled this recently answers the next ones too: at most one connection per second. */
export const SCHEMA_CHECK_REUSE_MS = 1000;

interface OwnConnectionCheck {
  databaseUrl: string;
  latest?: { state: Promise<SchemaState>; settledAt?: number };
}

/** The databases of the clients made by createPrisma, checked on connections of their own. */
const ownConnectionChecks = new WeakMap<PrismaClient, OwnConnectionCheck>();

/** Makes {@link schemaState} check `prisma`'s database (at `databaseUrl`) on a connection of its own; see there. */
export function checkSchemaOnOwnConnection(prisma: PrismaClient, databaseUrl: string): void {
  ownConnectionChecks.set(prisma, { databaseUrl });
}

/**
 * Whether the database has this code's newest migration applied: `not_migrated` for a database
 * that lacks it (or has no migrations table at all), which every request would fail on. Rejects
 * when the database cannot be reached. A database migrated further by newer code is `ok`.
 *
 * For a client made by createPrisma the check opens a connection of its own rather than waiting
 * in the client's pool: a pool kept busy by requests says nothing about the database, and a
 * readiness probe that waited in it would report the database unavailable on every busy replica
 * at once, turning load into an outage. A fresh connection also fails as new connections of the
 * pool would (a database that refuses, or is not migrated); one refused because the server has no
 * connection to spare runs on the pool instead. Checks running together share one
 * connection, and one settled less than a second ago answers for the next, so that however often
 * the probes come, a process opens at most about one such connection per second.
 */
export function schemaState(prisma: PrismaClient): Promise<SchemaState> {
  const check = ownConnectionChecks.get(prisma);
  const onPool = () => prisma.$queryRawUnsafe<{ applied: boolean }[]>(SCHEMA_STATE_SQL, latestMigration());
  if (!check) return observed(prisma, migrationState(onPool()));
  const latest = check.latest;
  if (latest && (latest.settledAt === undefined || Date.now() - latest.settledAt < SCHEMA_CHECK_REUSE_MS)) return latest.state;
  // A server with no connection to spare (its max_connections, or the role's limit, taken up by
  // the pools) is reachable all the same: the check then runs on the pool, as a request would.
  const rows = queryOnOwnConnection(check.databaseUrl).catch((err: unknown) => {
    if ((err as { code?: string })?.code === TOO_MANY_CONNECTIONS) return onPool();
    throw err;
  });
  const next: NonNullable<OwnConnectionCheck["latest"]> = { state: migrationState(rows) };
  const settle = () => void (next.settledAt = Date.now());
  next.state.then(settle, settle);
  check.latest = next;
  return observed(prisma, next.state);
}

/** Who hears of each new check of a client's database (a DatabaseWatch); a reused outcome is not heard again. */
const observers = new WeakMap<PrismaClient, (state: Promise<SchemaState>) => void>();

/** Makes `observer` hear of every new {@link schemaState} check of `prisma`, whoever made it. */
export function observeSchemaStates(prisma: PrismaClient, observer: (state: Promise<SchemaState>) => void): void {
  observers.set(prisma, observer);
}

function observed(prisma: PrismaClient, state: Promise<SchemaState>): Promise<SchemaState> {
  observers.get(prisma)?.(state);
  return state;
}

async function queryOnOwnConnection(databaseUrl: string): Promise<{ applied: boolean }[]> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: CHECK_TIMEOUT_MS, query_timeout: CHECK_TIMEOUT_MS });
  // A connection that breaks after its answer (the server stopping) must not crash the process.
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.query<{ applied: boolean }>(SCHEMA_STATE_SQL, [latestMigration()])).rows;
  } finally {
    // Not awaited: the end of a connection whose statement timed out waits for the server.
    client.end().catch(() => {});
  }
}

async function migrationState(rows: Promise<{ applied: boolean }[]>): Promise<SchemaState> {
  try {
    const [row] = await rows;
    return row?.applied ? "ok" : "not_migrated";
  } catch (err) {
    // `relation "_prisma_migrations" does not exist`: a database never migrated.
    if (/_prisma_migrations/.test((err as Error)?.message ?? "")) return "not_migrated";
    throw err;
  }
}

/**
 * Longest wait for one readiness check of a service's `/readyz`: a probe gets its answer within a
 * second (Kubernetes' default probe timeout), even from a database that stopped answering.
 */
export const READY_CHECK_TIMEOUT_MS = 900;

/** A readiness check: `check`, or a rejection with "timeout" once READY_CHECK_TIMEOUT_MS have passed without its settling. */
export function readyCheck<T>(check: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("timeout")), READY_CHECK_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([check, late]).finally(() => clearTimeout(timer));
}
