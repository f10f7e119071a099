import type { ChainableCommander, Redis } from "ioredis";
import { storableJsonText, type PrismaClient } from "@agentrun/db";
import type { RunEvent, RunEventInput } from "@agentrun/contracts";
import { RUN_LOG_TTL_AFTER_END_S, RUN_LOG_TTL_LIVE_S, runChannel, runLogKey } from "./keys";
import { batcherFor, type BatchedWrite, type RedisWriteBatcher } from "./redis-write-batcher";

export interface RunEventWriterOptions {
  redis: Redis;
  prisma: PrismaClient;
  redisPrefix: string;
  runId: string;
  /** The seq of the last event already emitted for this run (run_started is seq 1). */
  lastSeq: number;
  /**
   * How long events wait before being written to PostgreSQL in one batch. Until then they are in
   * the run's Redis log and in this writer (kept across failed writes), and whatever is left when
   * the run ends is stored with its final state; most runs end before a batch is due. Each batch
   * is one row of `run_event_batches`.
   * @defaultValue 1000
   */
  flushIntervalMs?: number;
  onError?: (err: unknown) => void;
  /** Keys deleted together with the terminal event's write (e.g. the run's heartbeat). */
  deleteAtEnd?: string[];
}

/** How long the live log's TTL may go without a refresh (it is set far longer). */
const EXPIRE_REFRESH_MS = 3600_000;

/**
 * Emits one run's events. Each event gets the next seq. Events go to Redis through the
 * connection's {@link RedisWriteBatcher}: at once when no batch is on its way, otherwise with the
 * next batch, which carries the writes of every run of the process from that turn of the event
 * loop; per run and batch, one RPUSH of its events onto the run's log and one PUBLISH on its
 * channel (a JSON array when there are several). Readers subscribe first and then read the log,
 * so they never miss one. PostgreSQL receives the events in batches, never one write per text
 * chunk. The terminal event is not emitted here: {@link takeTerminal} hands it to the caller,
 * who stores it with the run's final state in one transaction and then calls
 * {@link publishStored}.
 */
export class RunEventWriter implements BatchedWrite {
  private seq: number;
  private batch: RunEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly channel: string;
  private readonly logKey: string;
  /** Serialized events waiting for the next batch of the connection's {@link RedisWriteBatcher}. */
  private outbox: string[] = [];
  /** Whether this writer is in the batcher's next batch. */
  private queued = false;
  /** Callers waiting for the next batch of this writer to be answered. */
  private waiters: (() => void)[] = [];
  /** Waiters of the batches sent and not yet answered, oldest first. */
  private sent: (() => void)[][] = [];
  private readonly batcher: RedisWriteBatcher;
  private expireSetAt = 0;
  private endSent = false;

  constructor(private readonly opts: RunEventWriterOptions) {
    this.seq = opts.lastSeq;
    this.channel = runChannel(opts.redisPrefix, opts.runId);
    this.logKey = runLogKey(opts.redisPrefix, opts.runId);
    this.batcher = batcherFor(opts.redis);
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Emits a non-terminal event. */
  emit(input: RunEventInput): RunEvent {
    const event = { seq: ++this.seq, ...input } as RunEvent;
    this.outbox.push(JSON.stringify(event));
    this.enqueue();
    this.batch.push(event);
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.flush().catch((err) => this.opts.onError?.(err));
      }, this.opts.flushIntervalMs ?? 1000);
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
      // One row per batch. A batch with the same first seq is there when an earlier write of
      // these events reported an error but committed; this one holds all of its events and more.
      await this.opts.prisma.$executeRaw`
        INSERT INTO run_event_batches AS b (run_id, first_seq, last_seq, events, created_at)
        VALUES (${this.opts.runId}, ${events[0]!.seq}::integer, ${events.at(-1)!.seq}::integer, ${storableJsonText(events)}::jsonb, now())
        ON CONFLICT (run_id, first_seq) DO UPDATE SET last_seq = EXCLUDED.last_seq, events = EXCLUDED.events
        WHERE b.last_seq < EXCLUDED.last_seq`;
    };
    this.flushing = this.flushing.then(run, run);
    return this.flushing.catch((err) => {
      // Keep the events for the next flush so that none is lost while PostgreSQL is down.
      this.batch = [...events, ...this.batch];
      throw err;
    });
  }

  /**
   * Events not yet written to PostgreSQL (in order), once the write on its way has settled (a
   * failed one hands its events back); they must be stored with the final state.
   */
  async drain(): Promise<RunEvent[]> {
    const stopTimer = () => {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
    };
    stopTimer();
    await this.flushing.catch(() => {});
    stopTimer();
    const events = this.batch;
    this.batch = [];
    return events;
  }

  /** Assigns the terminal event its seq without sending it anywhere yet. */
  takeTerminal(input: RunEventInput): RunEvent {
    return { seq: ++this.seq, ...input } as RunEvent;
  }

  /**
   * An end that could not be stored: the events {@link drain} returned go back ahead of the batch
   * and the terminal event's seq is free again, so that the next attempt to end the run stores
   * them and numbers its terminal event right after the last event emitted.
   */
  giveBack(drained: RunEvent[], terminal: RunEvent): void {
    this.batch = [...drained, ...this.batch];
    if (this.seq === terminal.seq) this.seq--;
  }

  /**
   * Sends an event that is already in PostgreSQL (the terminal one) to Redis after every event
   * before it, and lets the log expire.
   */
  async publishStored(event: RunEvent): Promise<void> {
    await this.flushing.catch(() => {});
    this.outbox.push(JSON.stringify(event));
    this.endSent = true;
    await new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      this.enqueue();
    });
  }

  /** Whether the terminal event was handed to Redis (with the `deleteAtEnd` keys). */
  get ended(): boolean {
    return this.endSent;
  }

  private enqueue(): void {
    if (this.queued) return;
    this.queued = true;
    this.batcher.request(this);
  }

  /**
   * Adds the outbox to a batch: one RPUSH onto the run's log and one PUBLISH on its channel (a
   * JSON array when there are several events), EXPIRE when due, and with the terminal event the
   * `deleteAtEnd` keys. Part of {@link BatchedWrite}.
   */
  appendTo(pipeline: ChainableCommander): number {
    this.queued = false;
    this.sent.push(this.waiters);
    this.waiters = [];
    const events = this.outbox;
    if (events.length === 0) return 0;
    this.outbox = [];
    let n = 2;
    pipeline.rpush(this.logKey, ...events);
    const deleteKeys = this.endSent ? (this.opts.deleteAtEnd ?? []) : [];
    if (deleteKeys.length) {
      pipeline.del(...deleteKeys);
      n++;
    }
    const now = Date.now();
    if (this.endSent || now - this.expireSetAt > EXPIRE_REFRESH_MS) {
      pipeline.expire(this.logKey, this.endSent ? RUN_LOG_TTL_AFTER_END_S : RUN_LOG_TTL_LIVE_S);
      this.expireSetAt = now;
      n++;
    }
    pipeline.publish(this.channel, events.length === 1 ? events[0]! : `[${events.join(",")}]`);
    return n;
  }

  /** Part of {@link BatchedWrite}: the batch holding this writer's last appended commands was answered. */
  written(err: Error | null): void {
    if (err) {
      this.expireSetAt = 0; // the log may have been created without its TTL: set it next time
      this.opts.onError?.(err);
    }
    for (const resolve of this.sent.shift() ?? []) resolve();
  }
}
