import { hashApiKey } from "@agentrun/api-keys";
import type { PrismaClient } from "@agentrun/db";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
import { AuthCache } from "./auth-cache";
import { MAX_CACHED_LOOKUPS } from "./lookup-cache";

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

  it("looks a key and an agent up once for many requests that miss them at the same time", async () => {
    const tenant = await createTenant(prisma);
    const cache = new AuthCache(prisma, 900);
    const keyLookups = jest.spyOn(prisma.apiKey, "findUnique");
    const agentLookups = jest.spyOn(prisma.agent, "findUnique");
    keyLookups.mockClear();
    agentLookups.mockClear();
    const hash = hashApiKey(tenant.apiKey);
    const [keys, agents] = await Promise.all([
      Promise.all(Array.from({ length: 100 }, () => cache.apiKey(hash))),
      Promise.all(Array.from({ length: 100 }, () => cache.agent(tenant.agentId))),
    ]);
    expect(new Set(keys.map((k) => k?.keyId))).toEqual(new Set([tenant.keyId]));
    expect(new Set(agents.map((a) => a?.orgId))).toEqual(new Set([tenant.orgId]));
    expect(keyLookups).toHaveBeenCalledTimes(1);
    expect(agentLookups).toHaveBeenCalledTimes(1);
  });
});
