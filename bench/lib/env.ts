import { Redis } from "ioredis";
import pg from "pg";
import { dropDatabase, ensureDatabase, migrateDeploy } from "@agentrun/db";

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|::1)$/;

/** Refuses anything but a loopback address: the benchmark only ever loads this machine. */
export function assertLoopback(url: string, what: string): void {
  const host = new URL(url).hostname;
  if (!LOOPBACK.test(host)) throw new Error(`${what} must be on a loopback address (got ${host}); the benchmark only runs against this machine`);
}

/** URL of the benchmark database `name` on the PostgreSQL server of BENCH_DATABASE_ADMIN_URL. */
export function benchDatabaseUrl(name: string): string {
  const url = new URL(process.env.BENCH_DATABASE_ADMIN_URL || process.env.TEST_DATABASE_ADMIN_URL || "postgresql://postgres@127.0.0.1:5432/postgres");
  assertLoopback(url.toString(), "PostgreSQL");
  url.pathname = `/${name}`;
  return url.toString();
}

export function benchRedisUrl(): string {
  const url = process.env.REDIS_URL || "redis://127.0.0.1:6379";
  assertLoopback(url, "Redis");
  return url;
}

/** Creates the database when missing and applies the committed migrations. */
export async function prepareDatabase(databaseUrl: string): Promise<void> {
  await ensureDatabase(databaseUrl);
  await migrateDeploy(databaseUrl);
}

/** Deletes every Redis key under `prefix` (queues, run logs, heartbeats of this invocation). */
export async function dropRedisPrefix(redisUrl: string, prefix: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  let n = 0;
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) n += await redis.unlink(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return n;
}

/**
 * Ends runs that an earlier, interrupted invocation left queued or running. Each invocation
 * has its own Redis prefix, so their jobs are gone: without this, the workers' queued-run
 * sweeper would re-queue them (e.g. thousands of `[hang]` runs) into this invocation's queue.
 */
export async function endLeftoverRuns(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query(
      `UPDATE runs SET status = 'failed', error_code = 'bench_abandoned', error_message = 'left over by an interrupted benchmark', completed_at = now()
       WHERE status IN ('queued', 'running')`,
    );
    await client.query(`UPDATE tasks SET active_run_id = NULL, status = 'failed' WHERE active_run_id IS NOT NULL`);
    return res.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

/** Tables that every run updates (hot rows: the tenant's balance, its agent's task counters). */
const HOT_TABLES = ["organizations", "task_counts", "tasks", "runs", "credit_ledger", "run_event_batches", "messages"];

/**
 * Whether the server runs autovacuum. When it does not (this machine's PostgreSQL is configured
 * so), `vacuumHotTables` stands in for it between scenarios; otherwise the dead versions of the
 * hot rows pile up across scenarios and every later scenario measures the bloat, not the service.
 */
export async function autovacuumEnabled(databaseUrl: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query("SHOW autovacuum")).rows[0]?.autovacuum === "on";
  } finally {
    await client.end();
  }
}

/** VACUUM (ANALYZE) of the tables the runs update; returns how long it took (ms). */
export async function vacuumHotTables(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const t0 = Date.now();
  try {
    await client.query(`VACUUM (ANALYZE) ${HOT_TABLES.join(", ")}`);
    return Date.now() - t0;
  } finally {
    await client.end();
  }
}

/** A throw-away database: dropped if it exists, then created and migrated. */
export async function freshDatabase(databaseUrl: string): Promise<void> {
  await dropDatabase(databaseUrl);
  await prepareDatabase(databaseUrl);
}

export { dropDatabase };

/**
 * Deletes the Redis keys of earlier invocations (`agentrun-bench-<ms>…`) older than `maxAgeMs`,
 * which an invocation killed before its cleanup left behind. Returns how many keys went.
 */
export async function dropStaleBenchKeys(redisUrl: string, maxAgeMs = 3_600_000): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  let n = 0;
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", "agentrun-bench-*", "COUNT", 1000);
      cursor = next;
      const stale = keys.filter((k) => Number(/^agentrun-bench-(\d+)/.exec(k)?.[1] ?? Infinity) < Date.now() - maxAgeMs);
      if (stale.length) n += await redis.unlink(...stale);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return n;
}
