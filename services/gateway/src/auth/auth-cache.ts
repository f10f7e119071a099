import type { PrismaClient, Plan } from "@agentrun/db";
import { parsePricing } from "@agentrun/credits";
import { LookupCache } from "./lookup-cache";

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

  apiKey(keyHash: string): Promise<ApiKeyRecord | null> {
    return this.keys.getOrLoad(keyHash, async () => {
      const row = await this.prisma.apiKey.findUnique({
        where: { keyHash },
        select: { id: true, orgId: true, revokedAt: true, org: { select: { plan: true, rpmLimit: true } } },
      });
      return row ? { keyId: row.id, orgId: row.orgId, plan: row.org.plan, rpmLimit: row.org.rpmLimit, revoked: row.revokedAt !== null } : null;
    });
  }

  agent(agentId: string): Promise<AgentRecord | null> {
    return this.agents.getOrLoad(agentId, async () => {
      const row = await this.prisma.agent.findUnique({ where: { id: agentId }, select: { id: true, orgId: true, pricing: true } });
      return row ? { id: row.id, orgId: row.orgId, runReservation: parsePricing(row.pricing).base } : null;
    });
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
