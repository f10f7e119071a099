import { readSse, type SseResponse, type StreamOptions } from "./sse-client";

/**
 * Calls `fn` until it returns a value other than null/undefined/false, or fails after
 * `timeoutMs` with the last error or value it saw.
 */
export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, { timeoutMs = 20_000, intervalMs = 200 } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== null && v !== undefined && v !== false) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface SseWatch {
  /** Event payloads received so far (the `data` objects). */
  events: any[];
  /** Resolves when the stream ends. */
  result: Promise<SseResponse>;
  /** Resolves once an event satisfies `pred`. */
  waitFor(pred: (data: any, all: any[]) => boolean, timeoutMs?: number): Promise<void>;
}

/** Reads an SSE response in the background, so a test can act while it streams. */
export function watchSse(url: string, opts: Omit<StreamOptions, "until"> = {}): SseWatch {
  const events: any[] = [];
  const result = readSse(url, {
    timeoutMs: 60_000,
    ...opts,
    until: (e) => {
      events.push(e.data);
      return false;
    },
  });
  return {
    events,
    result,
    waitFor: (pred, timeoutMs = 10_000) => eventually(async () => events.some((e) => pred(e, events)), { timeoutMs, intervalMs: 20 }).then(() => undefined),
  };
}

/** `promise`'s value, or "timed out" after `ms` (the timer is cleared either way). */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | "timed out"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timed out">((resolve) => (timer = setTimeout(() => resolve("timed out"), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
