import { performance } from "node:perf_hooks";

export interface LoopOptions<T> {
  /** Requests in flight at once. */
  concurrency: number;
  /** Most requests in total (bound on count). */
  maxCount: number;
  /** No request starts after this long (bound on time); those in flight finish or time out. */
  durationMs: number;
  signal: AbortSignal;
  fn: (n: number) => Promise<T>;
}

export interface LoopResult<T> {
  results: T[];
  /** From the first request sent to the last one finished. */
  elapsedMs: number;
}

/**
 * A closed loop: `concurrency` clients, each sending its next request as soon as the previous
 * one finished, until `maxCount` requests were started, `durationMs` passed, or `signal` aborted.
 */
export async function closedLoop<T>(opts: LoopOptions<T>): Promise<LoopResult<T>> {
  const results: T[] = [];
  const start = performance.now();
  const deadline = start + opts.durationMs;
  let started = 0;
  const client = async () => {
    while (started < opts.maxCount && performance.now() < deadline && !opts.signal.aborted) {
      results.push(await opts.fn(started++));
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, client));
  return { results, elapsedMs: performance.now() - start };
}

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });

export interface SteadyLoopOptions<T> {
  concurrency: number;
  /** Requests sent before the measured window opens; their results are dropped. */
  warmup: number;
  /** Most requests measured (those started inside the window). */
  maxCount: number;
  /** No measured request starts after the window has been open this long. */
  durationMs: number;
  /**
   * Client i sends its first request i × rampMs / concurrency after the start, so that the
   * clients' requests arrive spread over time rather than in step (0: all at once).
   */
  rampMs: number;
  /**
   * Rounds in step instead of independent clients: the `concurrency` requests of a round start
   * together, and the next round starts when the last of them has ended. `rampMs` is then unused.
   * @defaultValue false
   */
  burst?: boolean;
  signal: AbortSignal;
  fn: () => Promise<T>;
  /** Whether a result counts as a completed request (for the window's throughput). */
  ok: (result: T) => boolean;
  /** Called when the measured window opens and when it closes. */
  onOpen?: () => void;
  onClose?: () => void;
}

export interface SteadyLoopResult<T> {
  /** Results of the requests started inside the window, in the order they finished. */
  results: T[];
  /** From the window's opening to its closing (when the last measured request finished). */
  elapsedMs: number;
  /** Requests of any phase that finished successfully inside the window. */
  completedInWindow: number;
  /**
   * Failed results (`ok` false) of the requests started outside the window (warm-up, cool-down):
   * kept out of the figures, but a failure all the same.
   */
  unmeasuredFailures: T[];
}

/**
 * A closed loop measured in steady state: `concurrency` clients, each sending its next request
 * as soon as its previous one finished (with `burst`, as soon as every client's previous one
 * finished), from a warm-up through the measured window to a cool-down. The window opens when
 * request number `warmup` starts and closes when every request started inside it has finished;
 * the clients keep the load up until then, so the last measured requests see the same load as
 * the first, then stop.
 */
export async function steadyLoop<T>(opts: SteadyLoopOptions<T>): Promise<SteadyLoopResult<T>> {
  const results: T[] = [];
  const unmeasuredFailures: T[] = [];
  let started = 0;
  let measuredStarted = 0;
  let measuredPending = 0;
  let completedInWindow = 0;
  let openAt: number | null = null;
  let closeAt: number | null = null;
  const open = (now: number) => {
    openAt = now;
    opts.onOpen?.();
  };
  /** When the last measured request that finished did. */
  let lastMeasuredEnd: number | null = null;
  const close = (at: number) => {
    closeAt = at;
    opts.onClose?.();
  };
  const going = () => closeAt === null && !opts.signal.aborted;
  /** One request, from its start to its accounting. */
  const request = async () => {
    const n = started++;
    if (n >= opts.warmup && openAt === null) open(performance.now());
    const measured = openAt !== null && measuredStarted < opts.maxCount && performance.now() < openAt + opts.durationMs;
    if (measured) (measuredStarted++, measuredPending++);
    // The window filled while none of its requests was in flight (the last one ended just before
    // its time was up, the next started just after): it closes where its last request ended.
    else if (openAt !== null && closeAt === null && measuredPending === 0 && lastMeasuredEnd !== null) close(lastMeasuredEnd);
    const r = await opts.fn();
    const now = performance.now();
    const ok = opts.ok(r);
    if (openAt !== null && closeAt === null && ok) completedInWindow++;
    if (!measured) {
      if (!ok) unmeasuredFailures.push(r);
      return;
    }
    results.push(r);
    measuredPending--;
    lastMeasuredEnd = now;
    const full = measuredStarted >= opts.maxCount || now >= openAt! + opts.durationMs;
    if (measuredPending === 0 && full && closeAt === null) close(now);
  };
  const clients = Math.max(1, opts.concurrency);
  if (opts.burst) {
    // Every round's requests start in one go; the round is the barrier.
    while (going()) await Promise.all(Array.from({ length: clients }, request));
  } else {
    const client = async (i: number) => {
      await sleep((i * opts.rampMs) / clients, opts.signal);
      while (going()) await request();
    };
    await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
  }
  // Aborted, or the loop ended before the window could fill: close it where it stands.
  if (openAt !== null && closeAt === null) close(performance.now());
  return { results, elapsedMs: openAt === null ? 0 : closeAt! - openAt, completedInWindow, unmeasuredFailures };
}
