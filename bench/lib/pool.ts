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
