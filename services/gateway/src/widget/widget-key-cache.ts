import type { PrismaClient, Plan } from "@agentrun/db";
import { parsePricing } from "@agentrun/credits";

/** A widget key as the widget routes need it. */
export interface WidgetKeyRecord {
  id: string;
  agentId: string;
  orgId: string;
  plan: Plan;
  rpmLimit: number | null;
  /** The agent's base price, which a run reserves when it is accepted. */
  runReservation: number;
  /** Normalized origins (`scheme://host[:port]`). */
  allowedOrigins: ReadonlySet<string>;
  revoked: boolean;
}

interface Entry<T> {
  value: T;
  expires: number;
}

/** Bounds each map, so that a caller cycling random keys or origins cannot grow it without limit. */
const MAX_ENTRIES = 10_000;

/**
 * `scheme://host[:port]` of an origin or URL, lower-cased and without a default port, as browsers
 * send it in `Origin`; null for anything that is not an http(s) origin (including `null`).
 */
export function normalizeOrigin(value: string): string | null {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : null;
  } catch {
    return null;
  }
}

/**
 * Short-lived lookups of widget keys, and of whether any active key allows an origin (what a
 * CORS preflight, which carries no widget key, can be decided on). The TTL is the API keys' one,
 * so a revoked widget key or a removed origin stops working within it on every instance.
 */
export class WidgetKeyCache {
  private readonly keys = new Map<string, Entry<WidgetKeyRecord | null>>();
  private readonly origins = new Map<string, Entry<boolean>>();

  constructor(
    private readonly prisma: PrismaClient,
    private readonly ttlMs: number,
  ) {}

  /** The key `pk_…`, or null when no key has that value. */
  async byKey(key: string): Promise<WidgetKeyRecord | null> {
    const hit = this.keys.get(key);
    if (hit && hit.expires > Date.now()) return hit.value;
    const row = await this.prisma.widgetKey.findUnique({
      where: { key },
      select: { id: true, agentId: true, allowedOrigins: true, revokedAt: true, agent: { select: { orgId: true, pricing: true, org: { select: { plan: true, rpmLimit: true } } } } },
    });
    const value: WidgetKeyRecord | null = row
      ? {
          id: row.id,
          agentId: row.agentId,
          orgId: row.agent.orgId,
          plan: row.agent.org.plan,
          rpmLimit: row.agent.org.rpmLimit,
          runReservation: parsePricing(row.agent.pricing).base,
          allowedOrigins: new Set(row.allowedOrigins.map(normalizeOrigin).filter((o): o is string => o !== null)),
          revoked: row.revokedAt !== null,
        }
      : null;
    this.remember(this.keys, key, value);
    return value;
  }

  /** True when at least one unrevoked widget key lists `origin` (already normalized). */
  async anyKeyAllows(origin: string): Promise<boolean> {
    const hit = this.origins.get(origin);
    if (hit && hit.expires > Date.now()) return hit.value;
    // The admin CLI stores origins normalized (URL.origin), so an exact match suffices.
    const row = await this.prisma.widgetKey.findFirst({ where: { revokedAt: null, allowedOrigins: { has: origin } }, select: { id: true } });
    const value = row !== null;
    this.remember(this.origins, origin, value);
    return value;
  }

  private remember<T>(map: Map<string, Entry<T>>, key: string, value: T): void {
    if (this.ttlMs <= 0) return;
    if (map.size >= MAX_ENTRIES) map.clear();
    map.set(key, { value, expires: Date.now() + this.ttlMs });
  }
}
