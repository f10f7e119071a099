import { randomUUID } from "node:crypto";
import pg from "pg";
import { newId, type PrismaClient } from "@agentrun/db";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
import { originAllowedSql, WidgetKeyCache } from "./widget-key-cache";

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
  const byOrigin = jest.spyOn(prisma, "$queryRaw");

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

it("looks an origin up on the index of the keys' origins, not by reading every key", async () => {
  const client = new pg.Client({ connectionString: testEnv().databaseUrl });
  await client.connect();
  try {
    const { text, values } = originAllowedSql("https://shop.example");
    await client.query("BEGIN");
    // A test database holds few keys, which the planner would rather scan: plans are compared as
    // on a table of many.
    await client.query("SET LOCAL enable_seqscan = off");
    const plan = (await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, values)).rows.map((r) => r["QUERY PLAN"]).join("\n");
    expect(plan).toContain("widget_keys_allowed_origins_idx");
    expect(plan).not.toContain("Seq Scan");
  } finally {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
});
