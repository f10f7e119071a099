import type { ChainableCommander, Redis } from "ioredis";
import { storableJsonText, type PrismaClient } from "@agentrun/db";
import type { RunEvent, RunEventInput } from "@agentrun/contracts";
import { RUN_LOG_TTL_AFTER_END_S, RUN_LOG_TTL_LIVE_S, runChannel, runLogKey, runWriterKey } from "./keys";
import { batcherFor, type BatchedWrite, type RedisWriteBatcher } from "./redis-write-batcher";
import { appendRunEvents, defineRunLogAppend } from "./run-log-append";

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
  /**
   * Who writes: the id of the worker that claimed the run (its `worker_id`), or the token of
   * whoever took the run over to end it. Once the run is ended or taken over by someone else,
   * this writer's events are refused: by the run's log in Redis, and by PostgreSQL, where a batch
   * is stored only while the run is `running` under this id. Without it, batches are stored
   * whatever the run's state (tests of the store alone).
   */
  writerId?: string;
  /** Called once, when the run's log refuses this writer's events (the run was taken over or ended elsewhere). */
  onSuperseded?: () => void;
}

/** The longest wait before a batch whose writes keep failing is tried again. */
const MAX_FLUSH_RETRY_MS = 30_000;

/** How long the live log's TTL may go without a refresh (it is set far longer). */
const EXPIRE_REFRESH_MS = 3600_000;

/**
 * Emits one run's events. Each event gets the next seq. Events go to Redis through the
 * connection's {@link RedisWriteBatcher}: at once when no batch is on its way, otherwise with the
 * next batch, which leaves when that one is answered and carries what every run of the process
 * emitted meanwhile; per run and batch, one RPUSH of its events onto the run's log and one PUBLISH on its
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
  private readonly writerKey: string;
  private refused = false;
  /** Writes to PostgreSQL that failed in a row. */
  private failedFlushes = 0;

  constructor(private readonly opts: RunEventWriterOptions) {
    this.seq = opts.lastSeq;
    this.channel = runChannel(opts.redisPrefix, opts.runId);
    this.logKey = runLogKey(opts.redisPrefix, opts.runId);
    this.writerKey = runWriterKey(opts.redisPrefix, opts.runId);
    defineRunLogAppend(opts.redis);
    this.batcher = batcherFor(opts.redis);
  }

  /** See {@link RunEventWriterOptions.writerId}. */
  get writerId(): string | undefined {
    return this.opts.writerId;
  }

  /** Whether the run's log has refused this writer: someone else ended the run or took it over. */
  get superseded(): boolean {
    return this.refused;
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Emits a non-terminal event. */
  emit(input: RunEventInput): RunEvent {
    const event = { seq: this.seq + 1, ...input } as RunEvent;
    // Serialized before its seq is taken: an event that cannot be (a value too deep for the
    // stack) throws without leaving a gap in the run's seqs.
    const text = this.refused ? "" : JSON.stringify(event);
    this.seq++;
    if (this.refused) return event;
    this.outbox.push(text);
    this.enqueue();
    this.batch.push(event);
    this.flushLater();
    return event;
  }

  /** Has the batch written to PostgreSQL after `delayMs`, unless a write is due already. */
  private flushLater(delayMs = this.opts.flushIntervalMs ?? 1000): void {
    if (this.timer || this.refused) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush().catch((err) => this.opts.onError?.(err));
    }, delayMs);
  }

  /** Takes back a run PostgreSQL shows queued without a worker (see `agentrun_reclaim_run`). */
  private async reclaim(writerId: string): Promise<boolean> {
    const [row] = await this.opts.prisma.$queryRaw<{ reclaimed: boolean }[]>`SELECT agentrun_reclaim_run(${this.opts.runId}, ${writerId}) AS reclaimed`;
    return row?.reclaimed === true;
  }

  /** Writes every buffered event to PostgreSQL. Safe to call concurrently; events stay in order. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const events = this.batch;
    this.batch = [];
    const writerId = this.opts.writerId ?? null;
    const run = async () => {
      if (events.length === 0 || this.refused) return;
      // One row per batch. A batch with the same first seq is there when an earlier write of
      // these events reported an error but committed; this one holds all of its events and more.
      // With a writer id, only while the run is running under it: the share lock makes whoever
      // takes the run over (it updates worker_id) wait for this batch, then read it.
      const write = () => this.opts.prisma.$queryRaw<{ held: boolean }[]>`
        WITH held AS (SELECT 1 FROM runs WHERE id = ${this.opts.runId} AND status = 'running' AND worker_id = ${writerId}::text FOR SHARE),
        stored AS (
          INSERT INTO run_event_batches AS b (run_id, first_seq, last_seq, events, created_at)
          SELECT ${this.opts.runId}, ${events[0]!.seq}::integer, ${events.at(-1)!.seq}::integer, ${storableJsonText(events)}::jsonb, now()
          WHERE ${writerId}::text IS NULL OR EXISTS (SELECT 1 FROM held)
          ON CONFLICT (run_id, first_seq) DO UPDATE SET last_seq = EXCLUDED.last_seq, events = EXCLUDED.events
          WHERE b.last_seq < EXCLUDED.last_seq)
        SELECT ${writerId}::text IS NULL OR EXISTS (SELECT 1 FROM held) AS held`;
      let [result] = await write();
      // Queued without a worker: PostgreSQL lost the claim (a crash undid its asynchronous
      // commit) while the writer went on. The run is the writer's again, as claimed, and so
      // ended or cancelled as a running run; a run ended or taken over meanwhile is not.
      if (result && !result.held && (await this.reclaim(writerId!))) [result] = await write();
      // Taken over in PostgreSQL: stop now rather than at the next append to the run's log.
      if (result && !result.held) this.supersede();
    };
    this.flushing = this.flushing.then(run, run);
    return this.flushing.then(
      () => void (this.failedFlushes = 0),
      (err) => {
        // Keep the events for the next flush so that none is lost while PostgreSQL is down, and
        // try again later even if the run emits nothing more (a long tool call), less often
        // while the failures go on (each is reported).
        this.putBack(events);
        this.failedFlushes++;
        const interval = this.opts.flushIntervalMs ?? 1000;
        if (this.batch.length > 0) this.flushLater(Math.min(interval * 2 ** this.failedFlushes, Math.max(interval, MAX_FLUSH_RETRY_MS)));
        throw err;
      },
    );
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
    this.putBack(drained);
    if (this.seq === terminal.seq) this.seq--;
  }

  /**
   * Returns events a failed write took to the batch, in seq order. Writes queue behind each
   * other, so when two fail, the later one's events come back after the earlier one's: put first,
   * they would make a batch that starts past where it ends, which readers after its end skip.
   */
  private putBack(events: RunEvent[]): void {
    this.batch = [...events, ...this.batch].sort((a, b) => a.seq - b.seq);
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
    const now = Date.now();
    let ttlS = 0;
    if (this.endSent || now - this.expireSetAt > EXPIRE_REFRESH_MS) {
      ttlS = this.endSent ? RUN_LOG_TTL_AFTER_END_S : RUN_LOG_TTL_LIVE_S;
      this.expireSetAt = now;
    }
    appendRunEvents(pipeline, {
      logKey: this.logKey,
      writerKey: this.writerKey,
      deleteKeys: this.endSent ? (this.opts.deleteAtEnd ?? []) : [],
      token: this.opts.writerId ?? "",
      channel: this.channel,
      message: events.length === 1 ? events[0]! : `[${events.join(",")}]`,
      ttlS,
      events,
    });
    return 1;
  }

  /** Part of {@link BatchedWrite}: the batch holding this writer's last appended commands was answered. */
  written(err: Error | null, replies: unknown[]): void {
    if (err) {
      this.expireSetAt = 0; // the log may have been created without its TTL: set it next time
      this.opts.onError?.(err);
    } else if (replies[0] === 0) {
      this.supersede();
    }
    for (const resolve of this.sent.shift() ?? []) resolve();
  }

  /** Someone else ended the run or took it over: nothing more from this writer anywhere. */
  private supersede(): void {
    if (this.refused) return;
    this.refused = true;
    this.batch = [];
    this.outbox = [];
    this.opts.onSuperseded?.();
  }
}
