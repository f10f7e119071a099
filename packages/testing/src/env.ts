export interface TestEnv {
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
}

/** The database and Redis prefix created for this test run by the global setup. */
export function testEnv(): TestEnv {
  const databaseUrl = process.env.DATABASE_URL;
  const redisPrefix = process.env.REDIS_PREFIX;
  if (!databaseUrl || !redisPrefix) throw new Error("run tests through jest: the global setup sets DATABASE_URL and REDIS_PREFIX");
  return { databaseUrl, redisUrl: process.env.REDIS_URL || "redis://127.0.0.1:6379", redisPrefix };
}
