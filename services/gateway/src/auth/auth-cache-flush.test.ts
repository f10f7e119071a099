import { createPrisma, type PrismaClient } from "@agentrun/db";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
import { AuthCache } from "./auth-cache";

// Real PostgreSQL: the flush fails because another transaction holds a key's row past the
// flushing client's lock_timeout, as a long transaction or a busy table would make it fail.
let prisma: PrismaClient;
let impatient: PrismaClient;

beforeAll(() => {
  const url = new URL(testEnv().databaseUrl);
  url.searchParams.set("options", "-c lock_timeout=200");
  prisma = testPrisma(testEnv().databaseUrl);
  impatient = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
});
afterAll(async () => {
  await Promise.all([prisma.$disconnect(), impatient.$disconnect()]);
});

/** Holds the row of `keyId` locked until the returned function is called. */
async function lockKeyRow(keyId: string): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const holder = prisma.$transaction(
    async (tx) => {
      await tx.$queryRaw`SELECT id FROM api_keys WHERE id = ${keyId} FOR UPDATE`;
      locked();
      await released;
    },
    { timeout: 10_000 },
  );
  await Promise.race([isLocked, holder]);
  return async () => {
    release();
    await holder;
  };
}

const lastUsed = async (keyId: string) => (await prisma.apiKey.findUniqueOrThrow({ where: { id: keyId } })).lastUsedAt;

it("keeps the uses of a failed write for the next flush, with the later time of a key used again meanwhile", async () => {
  const [again, once, earlier] = await Promise.all([createTenant(prisma), createTenant(prisma), createTenant(prisma)]);
  const at = (minute: number) => new Date(Date.UTC(2024, 0, 1, 0, minute));
  const cache = new AuthCache(impatient, 60_000);
  cache.markUsed(again.keyId, at(10));
  cache.markUsed(once.keyId, at(10));
  cache.markUsed(earlier.keyId, at(10));

  const unlock = await lockKeyRow(again.keyId);
  const failing = cache.flushLastUsed();
  // Used while the write waits: one key later, one with an older time (another clock's).
  cache.markUsed(again.keyId, at(20));
  cache.markUsed(earlier.keyId, at(5));
  await expect(failing).rejects.toThrow(/lock timeout/);
  await unlock();
  expect(await Promise.all([again, once, earlier].map((t) => lastUsed(t.keyId)))).toEqual([null, null, null]);

  await cache.flushLastUsed();
  expect(await Promise.all([again, once, earlier].map((t) => lastUsed(t.keyId)))).toEqual([at(20), at(10), at(10)]);
});
