/** Most entries of each map of a {@link LookupCache}; beyond it the oldest entry makes room. */
export const MAX_CACHED_LOOKUPS = 10_000;

/** Times are `performance.now()`: monotonic, so a wall clock set back cannot keep an entry alive. */
interface Entry<T> {
  value: T;
  /** When the load that read it started: the database state it shows is no older. */
  readAt: number;
  expires: number;
}

/**
 * Results of one kind of lookup, each trusted for `ttlMs` from the moment its load started, so
 * that no answer ever reflects the database as it was more than `ttlMs` ago. Rows found and ids
 * that found nothing are kept apart, each map bounded with oldest-first eviction: a caller
 * cycling ids that do not exist only ever evicts other misses, never a row that was found.
 *
 * Loads are shared: callers that miss the same key while it is being loaded wait for that one
 * load, so a popular key expiring under load costs one query, not one per request in flight. An
 * entry past half its TTL is still answered while one caller reloads it in the background: a key
 * in steady use is refreshed before it expires and its callers never wait for the database.
 */
export class LookupCache<T> {
  private readonly found = new Map<string, Entry<T>>();
  private readonly missing = new Map<string, Entry<null>>();
  /** Loads under way, with when each started. */
  private readonly loading = new Map<string, { result: Promise<T | null>; readAt: number }>();

  /**
   * @param ttlMs - how long a result is trusted; 0 caches nothing (and shares no load).
   * @param maxEntries - size of each map. @defaultValue {@link MAX_CACHED_LOOKUPS}
   */
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = MAX_CACHED_LOOKUPS,
  ) {}

  /** The cached result: a row, null for a known miss, undefined when there is none (or it expired). */
  get(key: string): T | null | undefined {
    return this.entry(key)?.value;
  }

  /** Caches `value` as read by a load that started at `readAt`, a `performance.now()` time (default: now). */
  set(key: string, value: T | null, readAt = performance.now()): void {
    if (this.ttlMs <= 0) return;
    const expires = readAt + this.ttlMs;
    if (expires <= performance.now()) return;
    const current = this.found.get(key) ?? this.missing.get(key);
    if (current && current.readAt > readAt) return; // a newer read is already cached
    if (value === null) {
      this.found.delete(key);
      remember(this.missing, key, { value, readAt, expires }, this.maxEntries);
    } else {
      this.missing.delete(key);
      remember(this.found, key, { value, readAt, expires }, this.maxEntries);
    }
  }

  /**
   * The cached result of `key`, or what `load` finds (null: nothing), which is then cached. A load
   * already under way for `key` is waited for instead of starting another, if it started less
   * than the TTL ago (an older one may show the database as it was before, say, a revocation);
   * its failure is every waiting caller's failure, and nothing is cached then. A cached result
   * past half its TTL is answered and reloaded in the background (a failed reload leaves it to
   * expire).
   */
  async getOrLoad(key: string, load: () => Promise<T | null>): Promise<T | null> {
    if (this.ttlMs <= 0) return load();
    const hit = this.entry(key);
    if (hit) {
      if (performance.now() - hit.readAt >= this.ttlMs / 2 && !this.loading.has(key)) this.start(key, load).catch(() => {});
      return hit.value;
    }
    const inFlight = this.loading.get(key);
    if (inFlight && performance.now() - inFlight.readAt < this.ttlMs) return inFlight.result;
    return this.start(key, load);
  }

  /** Entries held, found and missing (expired ones included until they are read or evicted). */
  get size(): { found: number; missing: number } {
    return { found: this.found.size, missing: this.missing.size };
  }

  private entry(key: string): Entry<T | null> | undefined {
    // A key is in at most one of the maps: `set` removes it from the other.
    const entry = this.found.get(key) ?? this.missing.get(key);
    if (!entry) return undefined;
    if (entry.expires > performance.now()) return entry;
    this.found.delete(key);
    this.missing.delete(key);
    return undefined;
  }

  private start(key: string, load: () => Promise<T | null>): Promise<T | null> {
    const readAt = performance.now();
    const loaded: Promise<T | null> = Promise.resolve()
      .then(load)
      .then((value) => {
        this.set(key, value, readAt);
        return value;
      })
      .finally(() => {
        if (this.loading.get(key)?.result === loaded) this.loading.delete(key);
      });
    this.loading.set(key, { result: loaded, readAt });
    return loaded;
  }
}

/** Sets `key` as the newest entry of `map` (a Map iterates in insertion order) and evicts the oldest beyond `max`. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value!);
}
