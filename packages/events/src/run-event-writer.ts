import type { Redis } from "ioredis";
import type { PrismaClient } from "@agentrun/db";
import type { RunEvent, RunEventInput } from "@agentrun/contracts";
import { RUN_LOG_TTL_AFTER_END_S, RUN_LOG_TTL_LIVE_S, runChannel, runLogKey } from "./keys";

export interface RunEventWriterOptions {
  redis: Redis;
  prisma: PrismaClient;
  redisPrefix: string;
  runId: string;
  /** The seq of the last event already emitted for this run (run_started is seq 1). */
  lastSeq: number;
  /**
   * How long events wait before being written to PostgreSQL in one batch.
   * @defaultValue 250
   */
  flushIntervalMs?: number;
  onError?: (err: unknown) => void;
}

/**
 * Emits one run's events. Each event gets the next seq and goes, in one pipelined round trip, to
 * the run's Redis log (RPUSH) and channel (PUBLISH); readers subscribe first and then read the
 * log, so they never miss one. PostgreSQL receives the events in batches, never one write per
 * text chunk. The terminal event is not emitted here: {@link takeTerminal} hands it to the
 * caller, who stores it with the run's final state in one transaction and then calls
 * {@link publishStored}.
 */
export class RunEventWriter {
  private seq: number;
  private batch: RunEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly channel: string;
  private readonly logKey: string;

  constructor(private readonly opts: RunEventWriterOptions) {
    this.seq = opts.lastSeq;
    this.channel = runChannel(opts.redisPrefix, opts.runId);
    this.logKey = runLogKey(opts.redisPrefix, opts.runId);
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Emits a non-terminal event. */
  emit(input: RunEventInput): RunEvent {
    const event = { seq: ++this.seq, ...input } as RunEvent;
    this.sendToRedis(event, RUN_LOG_TTL_LIVE_S);
    this.batch.push(event);
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.flush().catch((err) => this.opts.onError?.(err));
      }, this.opts.flushIntervalMs ?? 250);
    }
    return event;
  }

  /** Writes every buffered event to PostgreSQL. Safe to call concurrently; events stay in order. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const events = this.batch;
    this.batch = [];
    const run = async () => {
      if (events.length === 0) return;
      await this.opts.prisma.runEvent.createMany({
        data: events.map((e) => ({ runId: this.opts.runId, seq: e.seq, type: e.type, data: e as object })),
        skipDuplicates: true,
      });
    };
    this.flushing = this.flushing.then(run, run);
    return this.flushing.catch((err) => {
      // Keep the events for the next flush so that none is lost while PostgreSQL is down.
      this.batch = [...events, ...this.batch];
      throw err;
    });
  }

  /** Events not yet written to PostgreSQL (in order); they must be stored with the final state. */
  drain(): RunEvent[] {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const events = this.batch;
    this.batch = [];
    return events;
  }

  /** Assigns the terminal event its seq without sending it anywhere yet. */
  takeTerminal(input: RunEventInput): RunEvent {
    return { seq: ++this.seq, ...input } as RunEvent;
  }

  /** Sends events that are already in PostgreSQL (the terminal one) to Redis, and lets the log expire. */
  async publishStored(event: RunEvent): Promise<void> {
    await this.flushing.catch(() => {});
    await this.sendToRedis(event, RUN_LOG_TTL_AFTER_END_S);
  }

  private sendToRedis(event: RunEvent, ttlSeconds: number): Promise<void> {
    const json = JSON.stringify(event);
    return this.opts.redis
      .multi()
      .rpush(this.logKey, json)
      .expire(this.logKey, ttlSeconds)
      .publish(this.channel, json)
      .exec()
      .then(() => undefined)
      .catch((err) => this.opts.onError?.(err));
  }
}
