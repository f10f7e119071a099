import { Prisma, type PrismaClient, type Plan } from "@agentrun/db";
import { runReservation } from "@agentrun/credits";
import { LookupCache } from "../auth/lookup-cache";
import type { KeyChecker } from "../auth/revocation-watch";

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
 * Whether any widget key lists `origin`, on the GIN index of the keys' origins (a preflight from
 * an origin nobody allows must not scan every key).
 */
export const originAllowedSql = (origin: string): Prisma.Sql =>
  Prisma.sql`SELECT EXISTS (SELECT 1 FROM widget_keys WHERE allowed_origins @> ARRAY[${origin}]::text[]) AS allowed`;

/**
 * Short-lived lookups of widget keys, and of whether any key allows an origin (what a
 * CORS preflight, which carries no widget key, can be decided on). The TTL is the API keys' one,
 * so a revoked widget key or a removed origin stops working within it on every instance. Keys and
 * origins that match nothing are bounded apart from those that do (see {@link LookupCache}), so a
 * caller cycling random ones never pushes out the site's real key or origin.
 */
export class WidgetKeyCache implements KeyChecker {
  private readonly keys: LookupCache<WidgetKeyRecord>;
  /** An allowed origin is cached as true, one no key allows as a miss. */
  private readonly origins: LookupCache<true>;

  /** @param maxEntries - size of each of its maps (see {@link LookupCache}). */
  constructor(
    private readonly prisma: PrismaClient,
    ttlMs: number,
    maxEntries?: number,
  ) {
    this.keys = new LookupCache(ttlMs, maxEntries);
    this.origins = new LookupCache(ttlMs, maxEntries);
  }

  /** The key `pk_…`, or null when no key has that value. */
  byKey(key: string): Promise<WidgetKeyRecord | null> {
    return this.keys.getOrLoad(key, async () => {
      const row = await this.prisma.widgetKey.findUnique({
        where: { key },
        select: { id: true, agentId: true, allowedOrigins: true, revokedAt: true, agent: { select: { orgId: true, pricing: true, org: { select: { plan: true, rpmLimit: true } } } } },
      });
      if (!row) return null;
      return {
        id: row.id,
        agentId: row.agentId,
        orgId: row.agent.orgId,
        plan: row.agent.org.plan,
        rpmLimit: row.agent.org.rpmLimit,
        runReservation: runReservation(row.agent.pricing),
        allowedOrigins: new Set(row.allowedOrigins.map(normalizeOrigin).filter((o): o is string => o !== null)),
        revoked: row.revokedAt !== null,
      };
    });
  }

  /** Whether this widget key is still accepted (see RevocationWatch). */
  async stillValid(key: string): Promise<boolean> {
    const found = await this.byKey(key);
    return found !== null && !found.revoked;
  }

  /**
   * True when at least one widget key lists `origin` (already normalized), revoked or not: the
   * preflight of a page whose key was revoked is answered, so that its request gets the 401 it
   * can read (rather than a network error the widget would retry).
   */
  async anyKeyAllows(origin: string): Promise<boolean> {
    const allowed = await this.origins.getOrLoad(origin, async () => {
      // The admin CLI stores origins normalized (URL.origin), so an exact match suffices.
      const [row] = await this.prisma.$queryRaw<{ allowed: boolean }[]>(originAllowedSql(origin));
      return row?.allowed ? true : null;
    });
    return allowed === true;
  }
}
