import type { PrismaClient } from "@agentrun/db";
import { RUN_CANCEL_FLAG_TTL_S, runCancelKey } from "@agentrun/events";
import type { Logger } from "@agentrun/logger";
import type { Redis } from "ioredis";

/** A run whose creation went unanswered (see {@link AbandonedRuns}). */
export interface AbandonedRun {
  runId: string;
  query: string;
  log: Logger;
  /** Releases what the run held (its Idempotency-Key): called once PostgreSQL has answered whether the run is there. */
  release?: () => Promise<void>;
}

export interface AbandonedRunsOptions {
  prisma: PrismaClient;
  redis: Redis;
  redisPrefix: string;
  /** Ends a run found queued as unqueued, only while it is queued (a worker may claim it meanwhile): truthy if it did. */
  end: (run: { runId: string; query: string }) => Promise<unknown>;
  /** How long each run is looked for and its cancel flag tried. @defaultValue 60 s */
  watchMs?: number;
  /** Between two rounds. @defaultValue 1 s */
  everyMs?: number;
}

interface Watched extends AbandonedRun {
  until: number;
  /** Its cancel flag is set. */
  flagged: boolean;
  /** PostgreSQL answered where it stands, and a run found queued was ended: no more lookups. */
  settled: boolean;
  /** A lookup was answered (the run may not be there: its creation never committed); what it held is released then. */
  answered: boolean;
}

/** Most ids one lookup names. */
const IDS_PER_LOOKUP = 1000;

/**
 * The runs whose creation went unanswered (PostgreSQL stopped answering, or the connection was
 * lost after the statement was sent): each was answered 503, but the database may have committed
 * it, or still commit it once it answers again (a creation kept waiting on a lock commits after
 * its client gave up). Such a run must never execute. Its cancel flag makes a worker that claims
 * it (the workers queue old queued runs again) end it at once, free; and it is looked for, and
 * ended as unqueued once it is there and still queued. Both are tried every second for a minute.
 *
 * All of them at once: one pipeline sets the flags not set yet, and one statement per thousand
 * runs looks them up, however many requests a database outage left unanswered (a run of its own
 * per request would keep a read a second per request going, on the pool live traffic needs, for
 * a minute after the database is back).
 */
export class AbandonedRuns {
  private readonly runs = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private readonly watchMs: number;
  private readonly everyMs: number;

  constructor(private readonly opts: AbandonedRunsOptions) {
    this.watchMs = opts.watchMs ?? 60_000;
    this.everyMs = opts.everyMs ?? 1000;
  }

  /** Runs still watched. */
  get size(): number {
    return this.runs.size;
  }

  add(run: AbandonedRun): void {
    this.runs.set(run.runId, { ...run, until: Date.now() + this.watchMs, flagged: false, settled: false, answered: false });
    this.schedule(0);
  }

  /** Resolves once the round in progress, if any, is over (for tests and shutdown). */
  async idle(): Promise<void> {
    await this.round;
  }

  private schedule(ms: number): void {
    if (this.timer || this.round) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.round = this.check().finally(() => {
        this.round = undefined;
        if (this.runs.size > 0) this.schedule(this.everyMs);
      });
    }, ms);
    this.timer.unref();
  }

  private async check(): Promise<void> {
    const watched = [...this.runs.values()];
    await Promise.all([this.flag(watched.filter((r) => !r.flagged)), this.lookUp(watched.filter((r) => !r.settled))]);
    const now = Date.now();
    for (const run of watched) {
      if (run.flagged && run.settled) this.runs.delete(run.runId);
      else if (now >= run.until) {
        this.runs.delete(run.runId);
        // Looked for all along and never there: its creation did not commit. Never answered: unknown.
        if (!run.answered) run.log.error({ runId: run.runId }, "could not end a run whose creation went unanswered; its cancel flag stops it if it was created");
        else if (!run.flagged) run.log.error({ runId: run.runId }, "could not set the cancel flag of a run whose creation went unanswered");
      }
    }
  }

  /** Sets the cancel flags of `runs` in one round trip. */
  private async flag(runs: Watched[]): Promise<void> {
    if (runs.length === 0) return;
    const pipeline = this.opts.redis.pipeline();
    for (const run of runs) pipeline.set(runCancelKey(this.opts.redisPrefix, run.runId), "1", "EX", RUN_CANCEL_FLAG_TTL_S);
    const results = await pipeline.exec().catch(() => null);
    results?.forEach(([err], i) => {
      if (!err) runs[i]!.flagged = true;
    });
  }

  /** Looks `runs` up; ends those found queued, and releases what each held once PostgreSQL answered. */
  private async lookUp(runs: Watched[]): Promise<void> {
    for (let i = 0; i < runs.length; i += IDS_PER_LOOKUP) {
      const batch = runs.slice(i, i + IDS_PER_LOOKUP);
      let found: { id: string; status: string }[];
      try {
        found = await this.opts.prisma.run.findMany({ where: { id: { in: batch.map((r) => r.runId) } }, select: { id: true, status: true } });
      } catch {
        return;
      }
      const status = new Map(found.map((r) => [r.id, r.status]));
      await Promise.all(
        batch.map(async (run) => {
          this.markAnswered(run);
          const now = status.get(run.runId);
          // Not there (yet): its creation may still commit. Claimed by a worker: its cancel flag ends it.
          if (now === undefined) return;
          if (now === "queued") {
            try {
              if (await this.opts.end(run)) run.log.warn({ runId: run.runId }, "ended a run committed although its creation went unanswered");
            } catch {
              return;
            }
          }
          run.settled = true;
        }),
      );
    }
  }

  /** Marks `run` answered, releasing what it held the first time. */
  private markAnswered(run: Watched): void {
    if (run.answered) return;
    run.answered = true;
    void run.release?.().catch((err: unknown) => run.log.error({ err, runId: run.runId }, "could not release what the abandoned run held"));
  }
}
