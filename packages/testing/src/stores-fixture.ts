import type { PrismaClient } from "@agentrun/db";
import { createRedis, type Redis } from "@agentrun/redis";
import { testEnv } from "./env";
import { testPrisma } from "./tenant";

export interface TestStores {
  /** The test database. */
  prisma: PrismaClient;
  /** A command connection to the machine's Redis. */
  redis: Redis;
  /** A subscriber connection to it, with `subscriber: true`. */
  sub?: Redis;
}

/**
 * A test file's fixture for code that talks to the stores themselves (no services): before its
 * tests (`beforeAll`) opens the test database and Redis, handing them to `use`; after them
 * (`afterAll`) closes them. The object returned holds them from then on.
 */
export function testStores(opts: { subscriber?: boolean } = {}, use?: (stores: TestStores) => void): TestStores {
  const stores: Partial<TestStores> = {};
  beforeAll(() => {
    stores.prisma = testPrisma(testEnv().databaseUrl);
    stores.redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
    if (opts.subscriber) stores.sub = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
    use?.(stores as TestStores);
  });
  afterAll(async () => {
    stores.redis?.disconnect();
    stores.sub?.disconnect();
    await stores.prisma?.$disconnect();
  });
  return stores as TestStores;
}
