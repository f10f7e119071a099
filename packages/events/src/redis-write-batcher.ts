import type { ChainableCommander, Redis } from "ioredis";

/** Something with writes waiting for the next batch (a run's event writer). */
export interface BatchedWrite {
  /** Adds the pending commands to `pipeline`; returns how many it added. */
  appendTo(pipeline: ChainableCommander): number;
  /**
   * Called once the batch holding those commands is answered, with the first error among them (if
   * any) and their replies.
   */
  written(err: Error | null, replies: unknown[]): void;
}

/**
 * Sends the writes of every run a process executes as pipelines, at most one on its way at a
 * time. With many runs streaming at once, each run's tokens would otherwise cost a socket write
 * of their own and a wake-up for its reply (ioredis's auto-pipelining does not reach across the
 * I/O callbacks of different model streams): here whatever the runs emit while a batch is on its
 * way leaves as the next batch as soon as that one is answered, so under load one wake-up reads a
 * reply and sends the next batch. When no batch is on its way, a request goes out at once, so a
 * lone stream never waits. Order is kept: one connection, batches sent in order, each run's
 * commands in the order it added them.
 */
export class RedisWriteBatcher {
  private readonly waiting = new Set<BatchedWrite>();
  private inFlight = false;

  constructor(private readonly redis: Redis) {}

  /** Includes `source` in the next batch (once, however often it asks before that batch leaves). */
  request(source: BatchedWrite): void {
    this.waiting.add(source);
    if (!this.inFlight) this.send();
  }

  private send(): void {
    if (this.waiting.size === 0) return;
    const sources = [...this.waiting];
    this.waiting.clear();
    const pipeline = this.redis.pipeline();
    const counts = sources.map((s) => s.appendTo(pipeline));
    this.inFlight = true;
    pipeline.exec().then(
      (results) => {
        this.answered();
        let i = 0;
        sources.forEach((source, k) => {
          const mine = results?.slice(i, i + counts[k]!) ?? [];
          i += counts[k]!;
          source.written(mine.find(([err]) => err)?.[0] ?? null, mine.map(([, reply]) => reply));
        });
      },
      (err: Error) => {
        this.answered();
        for (const source of sources) source.written(err, []);
      },
    );
  }

  /** The batch on its way was answered: what waited for it leaves now. */
  private answered(): void {
    this.inFlight = false;
    this.send();
  }
}

const batchers = new WeakMap<Redis, RedisWriteBatcher>();

/** The batcher of a Redis connection (one per connection, shared by every writer on it). */
export function batcherFor(redis: Redis): RedisWriteBatcher {
  let batcher = batchers.get(redis);
  if (!batcher) {
    batcher = new RedisWriteBatcher(redis);
    batchers.set(redis, batcher);
  }
  return batcher;
}
