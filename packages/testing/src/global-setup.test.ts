import { Redis } from "ioredis";
import { testPrisma } from "./tenant";
import globalSetup from "./global-setup";
import globalTeardown from "./global-teardown";

// The suite's own setup and teardown, run once more with the variables README documents set to
// an empty value, which counts as unset: the defaults apply (the machine's PostgreSQL and Redis).
const NAMES = ["TEST_DATABASE_ADMIN_URL", "REDIS_URL", "LOG_LEVEL", "DATABASE_URL", "REDIS_PREFIX", "KEEP_TEST_DB"] as const;
let saved: Partial<Record<(typeof NAMES)[number], string>>;

beforeEach(() => {
  saved = Object.fromEntries(NAMES.map((n) => [n, process.env[n]]));
});
afterEach(() => {
  for (const n of NAMES) {
    if (saved[n] === undefined) delete process.env[n];
    else process.env[n] = saved[n];
  }
});

it("takes an empty TEST_DATABASE_ADMIN_URL, REDIS_URL or LOG_LEVEL for unset, and its teardown removes what it made", async () => {
  Object.assign(process.env, { TEST_DATABASE_ADMIN_URL: "", REDIS_URL: "", LOG_LEVEL: "" });
  delete process.env.KEEP_TEST_DB;
  await globalSetup();
  const { DATABASE_URL: databaseUrl, REDIS_PREFIX: prefix } = process.env;
  expect(databaseUrl).toMatch(/^postgresql:\/\/postgres@127\.0\.0\.1:5432\/agentrun_test_\w+$/);
  expect([process.env.REDIS_URL, process.env.LOG_LEVEL]).toEqual(["redis://127.0.0.1:6379", "silent"]);
  const prisma = testPrisma(databaseUrl!);
  const redis = new Redis(process.env.REDIS_URL!);
  try {
    // A migrated database, and a key under the run's prefix for the teardown to remove.
    expect(await prisma.organization.count()).toBe(0);
    await redis.set(`${prefix}:probe`, "1");
    await prisma.$disconnect();
    await globalTeardown();
    expect(await redis.exists(`${prefix}:probe`)).toBe(0);
    const admin = testPrisma("postgresql://postgres@127.0.0.1:5432/postgres");
    try {
      const name = new URL(databaseUrl!).pathname.slice(1);
      expect(await admin.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${name}`).toEqual([{ n: 0 }]);
    } finally {
      await admin.$disconnect();
    }
  } finally {
    redis.disconnect();
    await prisma.$disconnect();
  }
}, 60_000);
