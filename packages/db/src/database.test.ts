import { readdirSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { startPrivatePostgres, testEnv } from "@agentrun/testing";
import { dropDatabase, migrateDeploy } from "./database";

jest.setTimeout(60_000);

/** The test run's database URL with another database name. */
function urlOf(database: string): string {
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** The first column of what `sql` returns in the database at `databaseUrl`, as text. */
async function columnIn(databaseUrl: string, sql: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query({ text: sql, rowMode: "array" });
    return res.rows.map((r: unknown[]) => String(r[0]));
  } finally {
    await client.end();
  }
}

const tablesIn = (databaseUrl: string) => columnIn(databaseUrl, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'");

const MIGRATIONS_DIR = path.join(__dirname, "../../../prisma/migrations");

/** The names of the migrations the database records as finished, each once, in order. */
const appliedIn = (databaseUrl: string) =>
  columnIn(databaseUrl, "SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name");

describe("migrateDeploy (npm run db:migrate:deploy)", () => {
  const databaseUrl = urlOf(`${new URL(testEnv().databaseUrl).pathname.slice(1)}_fresh`);
  afterAll(() => dropDatabase(databaseUrl));

  it("creates the database when it does not exist, then applies every migration", async () => {
    await dropDatabase(databaseUrl);
    await migrateDeploy(databaseUrl);
    expect(await tablesIn(databaseUrl)).toEqual(expect.arrayContaining(["_prisma_migrations", "organizations", "runs"]));
    const migrations = readdirSync(MIGRATIONS_DIR, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
    expect(await appliedIn(databaseUrl)).toEqual(migrations);
    // A second deploy finds the database and nothing to apply.
    await migrateDeploy(databaseUrl);
    expect(await appliedIn(databaseUrl)).toEqual(migrations);
  });
});

describe("migrateDeploy and DATABASE_URL's parameters", () => {
  it("connects as sslmode says, as the services do: TLS required is TLS or nothing", async () => {
    // A cluster of its own, which (as initdb makes it) accepts no TLS.
    const server = await startPrivatePostgres();
    try {
      await migrateDeploy(`${server.url}?sslmode=disable`);
      expect(await tablesIn(server.url)).toEqual(expect.arrayContaining(["_prisma_migrations", "runs"]));
      await expect(migrateDeploy(`${server.url}?sslmode=require`)).rejects.toThrow(/SSL|TLS/);
    } finally {
      await server.destroy();
    }
  });
});
