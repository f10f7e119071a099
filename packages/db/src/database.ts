import { spawn } from "node:child_process";
import path from "node:path";
import pg from "pg";

/** Splits a PostgreSQL URL into the maintenance connection URL and the database name. */
function splitUrl(databaseUrl: string): { adminUrl: string; database: string } {
  const url = new URL(databaseUrl);
  const database = decodeURIComponent(url.pathname.slice(1));
  if (!database) throw new Error("DATABASE_URL names no database");
  url.pathname = "/postgres";
  return { adminUrl: url.toString(), database };
}

/** Creates the database named by `databaseUrl` when it does not exist. Returns true if it created it. */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const { adminUrl, database } = splitUrl(databaseUrl);
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database]);
    if (found.rowCount) return false;
    await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
    return true;
  } catch (err: any) {
    if (err?.code === "42P04") return false; // created concurrently
    throw err;
  } finally {
    await client.end();
  }
}

/** Drops the database named by `databaseUrl`, disconnecting anyone still connected. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const { adminUrl, database } = splitUrl(databaseUrl);
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${database.replaceAll('"', '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** The repository root, where prisma/ and scripts/ live. */
export const REPO_ROOT = path.resolve(__dirname, "../../..");

/**
 * Applies the committed migrations (`prisma migrate deploy` through the offline wrapper).
 * Rejects with the CLI's output when it fails.
 */
export function migrateDeploy(databaseUrl: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, "scripts/prisma-migrate.mjs"), "migrate", "deploy"], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`migrate deploy failed (exit ${code}):\n${out}`))));
  });
}
