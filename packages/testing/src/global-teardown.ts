import { dropDatabase } from "@agentrun/db";
import { Redis } from "ioredis";

/** Drops the test database and every Redis key under the run's prefix. */
export default async function globalTeardown(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  const prefix = process.env.REDIS_PREFIX;
  if (databaseUrl && process.env.KEEP_TEST_DB !== "true") await dropDatabase(databaseUrl);
  if (prefix && process.env.REDIS_URL) {
    const redis = new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
        cursor = next;
        if (keys.length) await redis.unlink(...keys);
      } while (cursor !== "0");
    } finally {
      redis.disconnect();
    }
  }
}
