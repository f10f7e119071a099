import { randomBytes } from "node:crypto";
import { ensureDatabase, migrateDeploy } from "@agentrun/db";

/**
 * Creates this test run's own database and Redis prefix. Workers inherit the environment set
 * here. The machine's PostgreSQL and Redis are used unless TEST_DATABASE_ADMIN_URL / REDIS_URL
 * say otherwise.
 */
export default async function globalSetup(): Promise<void> {
  const suffix = `${Date.now().toString(36)}_${randomBytes(3).toString("hex")}`;
  const admin = new URL(process.env.TEST_DATABASE_ADMIN_URL || "postgresql://postgres@127.0.0.1:5432/postgres");
  admin.pathname = `/agentrun_test_${suffix}`;
  const databaseUrl = admin.toString();
  await ensureDatabase(databaseUrl);
  await migrateDeploy(databaseUrl);
  process.env.DATABASE_URL = databaseUrl;
  process.env.REDIS_URL ||= "redis://127.0.0.1:6379";
  process.env.REDIS_PREFIX = `agentrun-test-${suffix}`;
  process.env.LOG_LEVEL ||= "silent";
}
