/**
 * Host name lookups the http tool may have in flight in one worker process. The system resolver
 * (`dns.lookup`, getaddrinfo) holds one of libuv's four pool threads until it answers, which for a
 * name server that never does is the resolver's own timeout (10 s and more), long after the tool
 * gave up; the worker's own lookups (the model's host, the memory service, the databases by name)
 * need those threads too. Two for the tool leave them two.
 * @defaultValue 2
 */
export const MAX_LOOKUPS_IN_FLIGHT = 2;
/**
 * Of those, what one organization may hold: one whose name server does not answer leaves the
 * other slot to the other organizations' runs.
 * @defaultValue 1
 */
export const MAX_LOOKUPS_PER_KEY = 1;

/** A caller that stopped waiting (its signal aborted, with `reason`) before a slot freed: its lookup never started. */
export class NoFreeSlot extends Error {
  override name = "NoFreeSlot";
  constructor(readonly reason: unknown) {
    super("no lookup slot was free in time");
  }
}

interface Waiter {
  key: string;
  start: () => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * Runs lookups at most `size` at a time, and at most `perKey` of one key (an organization). A
 * slot is held until the lookup itself settles, not until its caller stops waiting: what matters
 * is the thread it holds. Callers beyond a limit wait in order, each until a slot it may take
 * frees or its signal aborts ({@link NoFreeSlot}); a caller whose lookup started gets its
 * signal's reason when it aborts.
 */
export class LookupSlots {
  private inFlight = 0;
  private readonly byKey = new Map<string, number>();
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly size = MAX_LOOKUPS_IN_FLIGHT,
    private readonly perKey = MAX_LOOKUPS_PER_KEY,
  ) {}

  /** `lookup()` once a slot `key` may take is free. */
  run<T>(key: string, lookup: () => Promise<T>, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal.aborted) return reject(new NoFreeSlot(signal.reason));
      const start = () => {
        this.inFlight++;
        this.byKey.set(key, (this.byKey.get(key) ?? 0) + 1);
        // The caller stops waiting when its signal aborts; the lookup keeps its slot until it settles.
        const onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        // A lookup that throws at once settles like one that rejects: its slot is given back.
        Promise.resolve()
          .then(lookup)
          .then(resolve, reject)
          .finally(() => {
            signal.removeEventListener("abort", onAbort);
            this.inFlight--;
            const left = this.byKey.get(key)! - 1;
            if (left === 0) this.byKey.delete(key);
            else this.byKey.set(key, left);
            this.next();
          });
      };
      const waiter: Waiter = {
        key,
        start,
        signal,
        onAbort: () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(new NoFreeSlot(signal.reason));
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiting.push(waiter);
      // At once when a slot it may take is free (and no earlier caller may take it).
      this.next();
    });
  }

  private free(key: string): boolean {
    return this.inFlight < this.size && (this.byKey.get(key) ?? 0) < this.perKey;
  }

  /** Starts the first waiting lookups whose keys may take a slot now. */
  private next(): void {
    for (let i = 0; i < this.waiting.length && this.inFlight < this.size; ) {
      const waiter = this.waiting[i]!;
      if (!this.free(waiter.key)) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      waiter.signal.removeEventListener("abort", waiter.onAbort);
      waiter.start();
    }
  }
}
