import type { PrismaClient, Plan } from "@agentrun/db";
import { runReservation } from "@agentrun/credits";
import { LookupCache } from "./lookup-cache";
import type { KeyChecker } from "./revocation-watch";

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

/**
 * Short-lived lookups of API keys (by hash) and agents. The TTL bounds how long a revoked key
 * keeps working on any gateway instance. `last_used_at` is batched: keys used since the last
 * flush are written together, each with the time of its last use, never one database write per
 * request.
 */
export class AuthCache implements KeyChecker {
  private readonly keys: LookupCache<ApiKeyRecord>;
  private readonly agents: LookupCache<AgentRecord>;
  /** When each key was last used since the previous flush. */
  private readonly used = new Map<string, Date>();

  constructor(
    private readonly prisma: PrismaClient,
    ttlMs: number,
  ) {
    this.keys = new LookupCache(ttlMs);
    this.agents = new LookupCache(ttlMs);
  }

  apiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    return this.keys.getOrLoad(keyHash, async () => {
      const row = await this.prisma.apiKey.findUnique({
        where: { keyHash },
        select: { id: true, orgId: true, revokedAt: true, org: { select: { plan: true, rpmLimit: true } } },
      });
      return row ? { keyId: row.id, orgId: row.orgId, plan: row.org.plan, rpmLimit: row.org.rpmLimit, revoked: row.revokedAt !== null } : null;
    });
  }

  /** Whether the API key with this hash is still accepted (see RevocationWatch). */
  async stillValid(keyHash: string): Promise<boolean> {
    const key = await this.apiKey(keyHash);
    return key !== null && !key.revoked;
  }

  agent(agentId: string): Promise<AgentRecord | null> {
    return this.agents.getOrLoad(agentId, async () => {
      const row = await this.prisma.agent.findUnique({ where: { id: agentId }, select: { id: true, orgId: true, pricing: true } });
      return row ? { id: row.id, orgId: row.orgId, runReservation: runReservation(row.pricing) } : null;
    });
  }

  markUsed(keyId: string, at = new Date()): void {
    this.used.set(keyId, at);
  }

  /**
   * Writes `last_used_at` of every key used since the previous flush, in one statement: the time
   * of its last use, not of the flush (a key revoked meanwhile must not look used after that).
   * Another instance's later use is never overwritten with an earlier one. When the write fails,
   * its uses are kept for the next flush (a use recorded meanwhile is kept if it is later).
   */
  async flushLastUsed(): Promise<void> {
    if (this.used.size === 0) return;
    const pending = [...this.used];
    const ids = pending.map(([id]) => id);
    const times = pending.map(([, at]) => at.toISOString());
    this.used.clear();
    try {
      await this.prisma.$executeRaw`
        UPDATE api_keys SET last_used_at = u.at
        FROM unnest(${ids}::text[], ${times}::timestamptz[]) AS u(id, at)
        WHERE api_keys.id = u.id AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < u.at)`;
    } catch (err) {
      for (const [id, at] of pending) {
        const since = this.used.get(id);
        if (!since || since < at) this.used.set(id, at);
      }
      throw err;
    }
  }
}
