import type { PrismaClient, Plan } from "@agentrun/db";
import { parsePricing } from "@agentrun/credits";

export interface ApiKeyRecord {
  keyId: string;
  orgId: string;
  plan: Plan;
  rpmLimit: number | null;
  revoked: boolean;
}

export interface AgentRecord {
  id: string;
  orgId: string;
  /** The agent's base price, which a run reserves when it is accepted. */
  runReservation: number;
}

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

/**
 * Short-lived lookups of API keys (by hash) and agents. The TTL bounds how long a revoked key
 * keeps working on any gateway instance. `last_used_at` is batched: keys used since the last
 * flush are written together, never one database write per request.
 */
export class AuthCache {
  private readonly keys: LookupCache<ApiKeyRecord>;
  private readonly agents: LookupCache<AgentRecord>;
  private readonly used = new Set<string>();

  constructor(
    private readonly prisma: PrismaClient,
    ttlMs: number,
  ) {
    this.keys = new LookupCache(ttlMs);
    this.agents = new LookupCache(ttlMs);
  }

  async apiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    const hit = this.keys.get(keyHash);
    if (hit !== undefined) return hit;
    const row = await this.prisma.apiKey.findUnique({
      where: { keyHash },
      select: { id: true, orgId: true, revokedAt: true, org: { select: { plan: true, rpmLimit: true } } },
    });
    const value = row ? { keyId: row.id, orgId: row.orgId, plan: row.org.plan, rpmLimit: row.org.rpmLimit, revoked: row.revokedAt !== null } : null;
    this.keys.set(keyHash, value);
    return value;
  }

  async agent(agentId: string): Promise<AgentRecord | null> {
    const hit = this.agents.get(agentId);
    if (hit !== undefined) return hit;
    const row = await this.prisma.agent.findUnique({ where: { id: agentId }, select: { id: true, orgId: true, pricing: true } });
    const value = row ? { id: row.id, orgId: row.orgId, runReservation: parsePricing(row.pricing).base } : null;
    this.agents.set(agentId, value);
    return value;
  }

  markUsed(keyId: string): void {
    this.used.add(keyId);
  }

  /** Writes `last_used_at` for every key used since the previous flush, in one statement. */
  async flushLastUsed(): Promise<void> {
    if (this.used.size === 0) return;
    const ids = [...this.used];
    this.used.clear();
    await this.prisma.apiKey.updateMany({ where: { id: { in: ids } }, data: { lastUsedAt: new Date() } });
  }
}
