/**
 * How often a worker sets the heartbeat of a run it executes again: a third of the heartbeat's
 * TTL, so that a renewal or two may fail (or come late) before the heartbeat lapses.
 */
export const renewalIntervalMs = (ttlMs: number) => ttlMs / 3;

/** Allowance for a live worker's renewal being late (a busy event loop, a slow round trip). */
const RENEWAL_MARGIN_MS = 500;

/**
 * Waits one renewal interval and a margin (at most another interval, so at most two thirds of the
 * TTL in all): a live worker has set its heartbeat again by then, and a heartbeat this worker set
 * is still there if nobody did. Cut short when `signal` aborts (the caller then knows nothing new).
 */
export function waitOneRenewal(ttlMs: number, signal?: AbortSignal): Promise<void> {
  const interval = renewalIntervalMs(ttlMs);
  return pause(interval + Math.min(RENEWAL_MARGIN_MS, interval), signal);
}

/** Waits `ms`, cut short (resolved, not rejected) when `signal` aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
