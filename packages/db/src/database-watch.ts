import type { PrismaClient } from "./generated/prisma/client";
import { observeSchemaStates, schemaState, type SchemaState } from "./schema-state";

/** The part of a pino logger the watch writes to. */
export interface DatabaseWatchLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** How often the database is checked while it is not usable, to see it come back. */
export const DATABASE_RECHECK_MS = 5000;
/** A failed request checks the database only if no check settled this recently. */
const SUSPECT_AFTER_MS = 5000;

type Outcome = SchemaState | "unavailable";

/**
 * Logs a service's database becoming unusable, and usable again, once each: a warning on the
 * transition (unreachable, or not migrated to this version), and `"database reachable again"`
 * (or `"database usable again"`) at info with the outage's duration. It learns of the database's
 * state from every {@link schemaState} check of the client (readiness probes), from
 * {@link suspectDatabaseOutage} when a request failed as if it were down, and, while it is
 * down, from a check of its own every {@link DATABASE_RECHECK_MS}. Nothing runs while it is up.
 */
export class DatabaseWatch {
  private state: Outcome | undefined;
  private downSince: number | undefined;
  private lastCheck = 0;
  private recheck: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly logger: DatabaseWatchLogger,
  ) {}

  /**
   * A request failed for a dependency out of reach (the database or another): checks the
   * database, unless it is known down or was checked a moment ago, so that a failing request
   * costs a comparison and failures together at most one check.
   */
  suspect(): void {
    if (this.downSince !== undefined || Date.now() - this.lastCheck < SUSPECT_AFTER_MS) return;
    this.check();
  }

  /** Settles with a check's outcome; logs only a change. */
  observe(state: Promise<SchemaState>): void {
    state.then(
      (s) => this.settle(s),
      (err: unknown) => this.settle("unavailable", err),
    );
  }

  /** Stops the watch (its client is being closed): no more checks, no more lines. */
  close(): void {
    this.closed = true;
    this.stopRechecks();
    live.delete(this);
  }

  private stopRechecks(): void {
    clearInterval(this.recheck);
    this.recheck = undefined;
  }

  private check(): void {
    this.lastCheck = Date.now();
    // Observed through the hook watchDatabase set on schemaState.
    schemaState(this.prisma).catch(() => {});
  }

  private settle(now: Outcome, err?: unknown): void {
    if (this.closed) return;
    this.lastCheck = Date.now();
    const was = this.state;
    this.state = now;
    if (now === was) return;
    if (now === "ok") {
      this.stopRechecks();
      if (this.downSince === undefined) return;
      const downForMs = Date.now() - this.downSince;
      this.downSince = undefined;
      this.logger.info({ downForMs, was }, was === "unavailable" ? "database reachable again" : "database usable again");
      return;
    }
    this.downSince ??= Date.now();
    if (now === "unavailable") this.logger.warn({ err: (err as Error | undefined)?.message }, "database unreachable: requests that need it fail with 503 until it is back");
    else this.logger.warn({ database: now }, "database not migrated to this version: requests that need it fail with 503 until it is");
    this.recheck ??= setInterval(() => this.check(), DATABASE_RECHECK_MS);
    this.recheck.unref();
  }
}

const watches = new WeakMap<PrismaClient, DatabaseWatch>();
/** The watches not closed, which {@link suspectDatabaseOutage} tells (one per process, but in tests). */
const live = new Set<DatabaseWatch>();

/** The watch of `prisma`'s database, made on the first call (the next ones return it); see {@link DatabaseWatch}. */
export function watchDatabase(prisma: PrismaClient, logger: DatabaseWatchLogger): DatabaseWatch {
  let watch = watches.get(prisma);
  if (!watch) {
    const made = new DatabaseWatch(prisma, logger);
    watches.set(prisma, made);
    live.add(made);
    observeSchemaStates(prisma, (state) => made.observe(state));
    watch = made;
  }
  return watch;
}

/**
 * A request of this process failed for a dependency out of reach (the answer 503 `unavailable`
 * of the error handlers, which cannot tell the database from Redis or another service): every
 * watch checks its database ({@link DatabaseWatch.suspect}).
 */
export function suspectDatabaseOutage(): void {
  for (const watch of live) watch.suspect();
}
