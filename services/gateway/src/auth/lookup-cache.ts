/** Most entries of each map of a {@link LookupCache}; beyond it the oldest entry makes room. */
export const MAX_CACHED_LOOKUPS = 10_000;

interface Entry<T> {
  value: T;
  expires: number;
}

/**
 * Results of one kind of lookup, each trusted for `ttlMs`. Rows found and ids that found nothing
 * are kept apart, each map bounded with oldest-first eviction: a caller cycling ids that do not
 * exist only ever evicts other misses, never a row that was found.
 */
export class LookupCache<T> {
  private readonly found = new Map<string, Entry<T>>();
  private readonly missing = new Map<string, Entry<null>>();

  /**
   * @param ttlMs - how long a result is trusted; 0 caches nothing.
   * @param maxEntries - size of each map. @defaultValue {@link MAX_CACHED_LOOKUPS}
   */
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = MAX_CACHED_LOOKUPS,
  ) {}

  /** The cached result: a row, null for a known miss, undefined when there is none (or it expired). */
  get(key: string): T | null | undefined {
    // A key is in at most one of the maps: `set` removes it from the other.
    const entry = this.found.get(key) ?? this.missing.get(key);
    if (!entry) return undefined;
    if (entry.expires > Date.now()) return entry.value;
    this.found.delete(key);
    this.missing.delete(key);
    return undefined;
  }

  set(key: string, value: T | null): void {
    if (this.ttlMs <= 0) return;
    const expires = Date.now() + this.ttlMs;
    if (value === null) {
      this.found.delete(key);
      remember(this.missing, key, { value, expires }, this.maxEntries);
    } else {
      this.missing.delete(key);
      remember(this.found, key, { value, expires }, this.maxEntries);
    }
  }

  /** The cached result of `key`, or what `load` finds (null: nothing), which is then cached. */
  async getOrLoad(key: string, load: () => Promise<T | null>): Promise<T | null> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const value = await load();
    this.set(key, value);
    return value;
  }

  /** Entries held, found and missing (expired ones included until they are read or evicted). */
  get size(): { found: number; missing: number } {
    return { found: this.found.size, missing: this.missing.size };
  }
}

/** Sets `key` as the newest entry of `map` (a Map iterates in insertion order) and evicts the oldest beyond `max`. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value!);
}
