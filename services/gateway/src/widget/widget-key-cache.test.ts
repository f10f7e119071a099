import { randomUUID } from "node:crypto";
import { newId, type PrismaClient } from "@agentrun/db";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
import { WidgetKeyCache } from "./widget-key-cache";

// Real PostgreSQL; jest.spyOn only counts the lookups the cache lets through.
let prisma: PrismaClient;
beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
});
afterAll(async () => {
  jest.restoreAllMocks();
  await prisma.$disconnect();
});

it("keeps a real widget key and origin cached while unknown ones come and go beyond its size", async () => {
  const tenant = await createTenant(prisma);
  const key = `pk_${randomUUID().replace(/-/g, "")}`;
  const origin = `https://shop-${Date.now()}.example`;
  await prisma.widgetKey.create({ data: { id: newId("wk"), agentId: tenant.agentId, key, allowedOrigins: [origin] } });
  const cache = new WidgetKeyCache(prisma, 60_000, 20);
  const byKey = jest.spyOn(prisma.widgetKey, "findUnique");
  const byOrigin = jest.spyOn(prisma.widgetKey, "findFirst");

  expect(await cache.byKey(key)).toMatchObject({ agentId: tenant.agentId, revoked: false });
  expect(await cache.anyKeyAllows(origin)).toBe(true);
  for (let i = 0; i < 50; i++) {
    expect(await cache.byKey(`pk_unknown_${i}`)).toBeNull();
    expect(await cache.anyKeyAllows(`https://unknown-${i}.example`)).toBe(false);
  }
  expect(byKey).toHaveBeenCalledTimes(51);
  expect(byOrigin).toHaveBeenCalledTimes(51);

  // Still cached: no further lookup.
  expect(await cache.byKey(key)).toMatchObject({ agentId: tenant.agentId });
  expect(await cache.anyKeyAllows(origin)).toBe(true);
  expect(byKey).toHaveBeenCalledTimes(51);
  expect(byOrigin).toHaveBeenCalledTimes(51);
  // Misses are cached too, within their own bound: the most recent one is not looked up again.
  expect(await cache.byKey("pk_unknown_49")).toBeNull();
  expect(byKey).toHaveBeenCalledTimes(51);
});
