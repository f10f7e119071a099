import { isUnavailableError } from "@agentrun/errors";

/**
 * Runs `fn`, retrying with back-off while its error is `retryable` (by default: one that means a
 * dependency is down), for up to `forMs`.
 */
export async function withRetry<T>(forMs: number, fn: () => Promise<T>, retryable: (err: unknown) => boolean = isUnavailableError): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let delay = 200; ; delay = Math.min(delay * 2, 5000)) {
    try {
      return await fn();
    } catch (err) {
      if (!retryable(err) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
