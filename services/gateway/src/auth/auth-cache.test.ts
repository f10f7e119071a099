import { hashApiKey } from "@agentrun/api-keys";
import type { PrismaClient } from "@agentrun/db";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
import { AuthCache } from "./auth-cache";
import { LookupCache, MAX_CACHED_LOOKUPS } from "./lookup-cache";

describe("LookupCache", () => {
  it("keeps what was found while more than its size of distinct misses come and go", () => {
    const cache = new LookupCache<string>(60_000, 100);
    cache.set("found", "row");
    for (let i = 0; i < 1000; i++) cache.set(`miss-${i}`, null);
    expect(cache.get("found")).toBe("row");
    expect(cache.size).toEqual({ found: 1, missing: 100 });
    // The newest misses are kept, the oldest made room.
    expect(cache.get("miss-999")).toBeNull();
    expect(cache.get("miss-900")).toBeNull();
    expect(cache.get("miss-899")).toBeUndefined();
    expect(cache.get("miss-0")).toBeUndefined();
  });

  it("evicts the oldest entry first, counting a rewrite as new", () => {
    const cache = new LookupCache<number>(60_000, 3);
    cache.set("a", 1);
    cache.set("b", 2);
    cache.set("c", 3);
    cache.set("a", 10);
    cache.set("d", 4);
    expect(["a", "b", "c", "d"].map((k) => cache.get(k))).toEqual([10, undefined, 3, 4]);
  });

  it("keeps a key in one map only: a miss that is later found is a hit, and the reverse", () => {
    const cache = new LookupCache<number>(60_000, 10);
    cache.set("k", null);
    cache.set("k", 1);
    expect(cache.get("k")).toBe(1);
    cache.set("k", null);
    expect(cache.get("k")).toBeNull();
    expect(cache.size).toEqual({ found: 0, missing: 1 });
  });

  it("forgets entries after the TTL, and caches nothing with a TTL of 0", async () => {
    const short = new LookupCache<number>(20);
    short.set("k", 1);
    short.set("gone", null);
    await new Promise((r) => setTimeout(r, 40));
    expect(short.get("k")).toBeUndefined();
    expect(short.get("gone")).toBeUndefined();
    const none = new LookupCache<number>(0);
    none.set("k", 1);
    expect(none.get("k")).toBeUndefined();
  });
});

describe("AuthCache", () => {
  let prisma: PrismaClient;
  beforeAll(() => {
    prisma = testPrisma(testEnv().databaseUrl);
  });
  afterAll(() => prisma.$disconnect());

  it(`still has a valid key cached after more than ${MAX_CACHED_LOOKUPS} distinct unknown keys`, async () => {
    const tenant = await createTenant(prisma);
    const cache = new AuthCache(prisma, 60_000);
    const lookups = jest.spyOn(prisma.apiKey, "findUnique");
    const valid = hashApiKey(tenant.apiKey);
    expect(await cache.apiKey(valid)).toMatchObject({ keyId: tenant.keyId, orgId: tenant.orgId, revoked: false });
    expect(lookups).toHaveBeenCalledTimes(1);

    const misses = MAX_CACHED_LOOKUPS + 100;
    const PARALLEL = 20;
    for (let i = 0; i < misses; i += PARALLEL) {
      const hashes = Array.from({ length: Math.min(PARALLEL, misses - i) }, (_, j) => hashApiKey(`unknown-${i + j}`));
      expect(await Promise.all(hashes.map((h) => cache.apiKey(h)))).toEqual(hashes.map(() => null));
    }
    expect(lookups).toHaveBeenCalledTimes(1 + misses);

    expect(await cache.apiKey(valid)).toMatchObject({ keyId: tenant.keyId });
    expect(lookups).toHaveBeenCalledTimes(1 + misses);
  }, 60_000);
});
