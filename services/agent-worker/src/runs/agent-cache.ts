import type { Agent, PrismaClient } from "@agentrun/db";

/**
 * Agents by id, cached for a few seconds: every run reads its agent, and agents change rarely.
 * An edit takes effect for runs starting after the TTL.
 */
export class AgentCache {
  private readonly entries = new Map<string, { agent: Promise<Agent>; expires: number }>();

  constructor(
    private readonly prisma: PrismaClient,
    /** @defaultValue 5000 */
    private readonly ttlMs = 5000,
  ) {}

  get(agentId: string): Promise<Agent> {
    const hit = this.entries.get(agentId);
    if (hit && hit.expires > Date.now()) return hit.agent;
    const agent = this.prisma.agent.findUniqueOrThrow({ where: { id: agentId } });
    if (this.entries.size > 10_000) this.entries.clear();
    this.entries.set(agentId, { agent, expires: Date.now() + this.ttlMs });
    agent.catch(() => this.entries.delete(agentId));
    return agent;
  }
}
