/**
 * Host name lookups the http tool may have in flight in one worker process. The system resolver
 * (`dns.lookup`, getaddrinfo) holds one of libuv's four pool threads until it answers, which for a
 * name server that never does is the resolver's own timeout (10 s and more), long after the tool
 * gave up; the worker's own lookups (the model's host, the memory service, the databases by name)
 * need those threads too. Two for the tool leave them two.
 * @defaultValue 2
 */
export const MAX_LOOKUPS_IN_FLIGHT = 2;

interface Waiter {
  start: () => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * Runs lookups at most `size` at a time. A slot is held until the lookup itself settles, not
 * until its caller stops waiting: what matters is the thread it holds. Callers beyond the limit
 * wait in order, each until a slot frees or its signal aborts.
 */
export class LookupSlots {
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly size = MAX_LOOKUPS_IN_FLIGHT) {}

  /** `lookup()` once a slot is free; rejects with `signal`'s reason if it aborts first. */
  run<T>(lookup: () => Promise<T>, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const start = () => {
        this.inFlight++;
        const work = lookup();
        work.then(resolve, reject).finally(() => {
          this.inFlight--;
          this.next();
        });
      };
      if (this.inFlight < this.size) return start();
      const waiter: Waiter = {
        start,
        signal,
        onAbort: () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(signal.reason);
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private next(): void {
    const waiter = this.waiting.shift();
    if (!waiter) return;
    waiter.signal.removeEventListener("abort", waiter.onAbort);
    waiter.start();
  }
}
