import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";
import { readDbEventsOrEnd } from "./db-events";
import { runChannel, runLogKey } from "./keys";
import { readLogAfter } from "./run-log-tail";
import type { SubscriberHub } from "./subscriber-hub";
import type { EarlyRunSubscription } from "./early-subscription";
import { RunGoneError, runExists } from "./run-gone";
import { mergeEvents, parseEvents, readFoundRunEvents, type EventStore } from "./stored-events";

export interface FollowRunOptions extends EventStore {
  hub: SubscriberHub;
  runId: string;
  /** Deliver events after this seq. @defaultValue 0 */
  afterSeq?: number;
  /** Receives each event once, in seq order, with no gaps (but for the terminal event of a run that ended before `afterSeq`). */
  onEvent: (event: RunEvent) => void;
  signal?: AbortSignal;
  /**
   * The run was just created by the caller, who holds its events up to `afterSeq`: every later
   * event is written to the Redis log before anywhere else, so the first read skips PostgreSQL.
   * (The periodic re-read still falls back to it if the log was lost.)
   */
  fresh?: boolean;
  /**
   * A subscription the caller opened before the run could emit (see EarlyRunSubscription), used
   * instead of subscribing here. With `fresh`, nothing is read from the store at first: every
   * event after `afterSeq` arrives on it.
   */
  subscription?: EarlyRunSubscription;
  /**
   * First interval of the safety re-check of the store, which heals a message lost without a
   * reconnection (after a reconnection the store is read at once). It doubles while nothing new
   * turns up, up to `maxPollIntervalMs`, and starts again at the next event.
   * @defaultValue 5000
   */
  pollIntervalMs?: number;
  /** @defaultValue 60000 */
  maxPollIntervalMs?: number;
  /**
   * Called once the subscription is confirmed and the first read of the store delivered what it
   * held: from then on, an outage of either store no longer fails the follow (the periodic check
   * heals it). Before then, one fails it (the promise rejects), and so does finding the run gone
   * (with {@link RunGoneError}), so that the caller can still answer 404.
   */
  onReady?: () => void;
}

/**
 * Delivers a run's events from `afterSeq` to the terminal event: subscribes to the live channel
 * first, then reads what is stored, and merges both by seq, so nothing is skipped or sent twice.
 * Resolves with the terminal event, or null when `signal` aborts first or the run turns out to
 * be gone (its task deleted after the caller looked it up) once the first read was delivered
 * (before, the promise rejects with RunGoneError). The terminal event is
 * delivered unless the caller holds its seq already; a caller past it gets it out of order.
 */
export function followRun(opts: FollowRunOptions): Promise<RunEvent | null> {
  const { hub, runId, onEvent, signal } = opts;
  let next = (opts.afterSeq ?? 0) + 1;
  const pending = new Map<number, RunEvent>();
  let finished = false;
  // The first read of the store was delivered (`onReady`).
  let ready = false;
  // A read of the store succeeded (the first read, or a check's made before the first read began,
  // as while Redis is down and the subscription waits): events may be delivered.
  let readStore = false;
  // The first read is on its way: its outcome, not a check's, decides whether the follow starts.
  let firstReading = false;
  let unsubscribe: (() => void) | null = null;
  let stopResync: (() => void) | null = null;
  let poll: NodeJS.Timeout | null = null;
  let filling = false;
  // A fill asked for while one was running (a gap or a resync it may have missed): run it next.
  let fillAgain = false;
  const basePollMs = opts.pollIntervalMs ?? 5000;
  const maxPollMs = Math.max(basePollMs, opts.maxPollIntervalMs ?? 60_000);
  let pollMs = basePollMs;
  // The delay of the check waiting to run (0 while none waits: one is running).
  let scheduledMs = 0;
  let idlePolls = 0;

  return new Promise<RunEvent | null>((resolve, reject) => {
    const finish = (result: RunEvent | null, err?: unknown) => {
      if (finished) return;
      finished = true;
      unsubscribe?.();
      stopResync?.();
      if (poll) clearTimeout(poll);
      signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve(result);
    };
    const onAbort = () => finish(null);
    // The run was deleted with its task: nothing more will come.
    const gone = () => finish(null, ready ? undefined : new RunGoneError(runId));

    /**
     * Delivers the pending events that follow what was delivered, in order; none before a read of
     * the store has succeeded (the channel's messages wait for it), so that a caller whose first
     * read fails has sent nothing and can still answer with the error.
     */
    const deliver = () => {
      if (!readStore) return;
      for (let ev = pending.get(next); ev; ev = pending.get(next)) {
        pending.delete(next);
        next++;
        idlePolls = 0;
        pollMs = basePollMs;
        onEvent(ev);
        if (isTerminalEvent(ev)) return finish(ev);
      }
      // The run is active again after a quiet spell: its next check comes soon, not a minute on
      // (an end whose publish is lost is then found within the first interval), also when what
      // came is held behind a gap (delivering nothing yet: the checks that fill it start over).
      if (scheduledMs > basePollMs && poll) {
        clearTimeout(poll);
        pollMs = basePollMs;
        idlePolls = 0;
        schedulePoll();
      }
    };
    /** `fromStore`: read by a fill, which a gap then does not start again (the next check reads again). */
    const add = (e: RunEvent, fromStore = false) => {
      if (finished) return;
      // The run ended at or before what the caller has already: nothing more will come. A caller
      // past its terminal event holds events the store lost (its worker died with them, and Redis
      // with its log): it has not seen this end, so it gets it, with its own seq.
      if (e.seq < next && isTerminalEvent(e)) {
        if (e.seq < next - 1) onEvent(e);
        return finish(e);
      }
      if (e.seq < next) return;
      pending.set(e.seq, e);
      deliver();
      // A gap in what the channel brought means a message was lost between the log and the
      // channel: read the store. (One in what the stores hold is an event not stored yet.)
      if (readStore && !finished && pending.size > 0 && !fromStore) void fill();
    };

    /** Whether the run's terminal event is among those waiting for a gap before them. */
    const endPending = () => [...pending.values()].some(isTerminalEvent);

    // The events of the log's last entry: the reads below skip what was delivered, so a terminal
    // event the caller is already past is handed to `add` here, which ends the stream with it.
    const passedEnd = (last: RunEvent[]): boolean => {
      for (const e of last) if (e.seq < next && isTerminalEvent(e)) add(e);
      return finished;
    };

    // The periodic check looks at the tail of the run's Redis log (one O(1) read) and reads the
    // log only when it holds something new; a read of the log takes its entries after what was
    // delivered (and its last one), not the whole log of a long run (see readLogAfter). PostgreSQL is read when the log cannot tell: it is
    // empty (expired, lost with a Redis restart, or the run emitted nothing yet), or it ends at
    // what was delivered (a terminal event stored while its publish failed is only there); then
    // on the first two idle checks and on every check once they are a minute apart, so that
    // thousands of idle streams cost Redis and the database little.
    const fill = async (periodic = false) => {
      if (finished) return;
      if (filling) {
        fillAgain ||= !periodic;
        return;
      }
      filling = true;
      try {
        const key = runLogKey(opts.redisPrefix, runId);
        let log: string[] | null = null;
        // The run's log is gone from Redis (expired, lost, or deleted with the run's task).
        let logGone = false;
        try {
          if (periodic) {
            idlePolls++;
            const tail = await opts.redis.lindex(key, -1);
            logGone = tail === null;
            const tailEvents = tail === null ? [] : parseEvents(tail);
            if (passedEnd(tailEvents)) return;
            const tailSeq = tail === null ? null : Math.max(...tailEvents.map((e) => e.seq));
            if (tailSeq !== null && tailSeq >= next) log = await readLogAfter(opts, runId, next - 1);
            else if (!(idlePolls <= 2 || pollMs >= maxPollMs)) return;
          } else {
            log = await readLogAfter(opts, runId, next - 1);
            logGone = log.length === 0;
            if (passedEnd(log.length ? parseEvents(log.at(-1)!) : [])) return;
          }
        } catch {
          // Redis out of reach: PostgreSQL still holds what the worker flushed, and a run's end
          // stored while its publish failed.
          log = null;
        }
        const fromLog = mergeEvents([], log ?? [], next - 1);
        const covered = fromLog.length > 0 && fromLog[0]!.seq === next;
        // A terminal event is published only once stored, with every event before it that its
        // writer had: one known before PostgreSQL is read shows that the read sees all of them.
        const endKnown = endPending();
        const rows = covered ? [] : await readDbEventsOrEnd(opts, runId, next - 1);
        const read = mergeEvents(rows, log ?? [], next - 1);
        if (!firstReading) readStore = true;
        // A run whose log and row are gone was deleted with its task after this reader looked it
        // up: nothing more will come. (A live run's log is there, run_started first.)
        if (logGone && rows.length === 0 && !(await runExists(opts.prisma, runId))) return gone();
        for (const e of read) add(e, true);
        // The run has ended and neither store has the next seq: it was lost for good (an append
        // that failed, and its worker gone before storing it). Go on past the gap rather than
        // wait for ever. A terminal event that arrived during the read proves nothing about what
        // the read saw: the fill it asked for reads again. Every gap before the end is such a
        // loss, so each is passed in turn. Unless the run is gone: a task's delete removes the
        // run's rows (run_started among them) before its log, which until then holds the rest,
        // the end included. Its row, read after the events, tells.
        if (readStore && !finished && !covered && (endKnown || read.some(isTerminalEvent)) && endPending()) {
          if (!(await runExists(opts.prisma, runId))) return gone();
          while (!finished && pending.size > 0) {
            next = lowestSeq(pending);
            deliver();
          }
        }
      } catch {
        // The next check tries again; a lasting outage is reported by the caller's checks.
      } finally {
        filling = false;
        if (fillAgain && !finished) {
          fillAgain = false;
          void fill();
        }
      }
    };
    const schedulePoll = () => {
      scheduledMs = pollMs;
      poll = setTimeout(() => {
        scheduledMs = 0;
        if (finished) return;
        void fill(true).finally(() => {
          pollMs = Math.min(pollMs * 2, maxPollMs);
          if (!finished) schedulePoll();
        });
      }, pollMs);
      poll.unref();
    };

    if (signal?.aborted) {
      opts.subscription?.close();
      return finish(null);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    // The safety check runs from the start, not from the subscription's confirmation: while Redis
    // is down the SUBSCRIBE waits for its return, and the check still finds in PostgreSQL what
    // was stored meanwhile (a run's end among it).
    schedulePoll();
    const onMessage = (msg: string) => {
      for (const e of parseEvents(msg)) add(e);
    };
    const early = opts.subscription;
    const subscribed = early ? early.ready.then((unsub) => (early.attach(onMessage), unsub)) : hub.subscribe(runChannel(opts.redisPrefix, runId), onMessage, signal);
    subscribed
      .then(async (unsub) => {
        if (finished) return unsub();
        unsubscribe = unsub;
        stopResync = hub.onResync(() => void fill());
        if (!(early && opts.fresh)) {
          // The first read must succeed: without it the caller cannot know what it missed.
          firstReading = true;
          const first = opts.fresh
            ? mergeEvents([], await readLogAfter(opts, runId, next - 1), next - 1)
            : await readFoundRunEvents(opts, runId, next - 1);
          for (const e of first) add(e);
        }
        if (finished) return;
        ready = readStore = true;
        deliver();
        if (finished) return;
        // A gap left in what came (see add): read the store for it.
        if (pending.size > 0) void fill();
        opts.onReady?.();
      })
      .catch((err) => finish(null, err));
  });
}

/** The lowest key of `pending` (a loop: a spread of a run's many held events would overflow the stack). */
function lowestSeq(pending: ReadonlyMap<number, unknown>): number {
  let lowest = Infinity;
  for (const seq of pending.keys()) if (seq < lowest) lowest = seq;
  return lowest;
}
