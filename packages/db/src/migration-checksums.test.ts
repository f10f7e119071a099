import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { testEnv } from "@agentrun/testing";

const PRISMA_DIR = join(__dirname, "../../../prisma");
const MIGRATIONS_DIR = join(PRISMA_DIR, "migrations");

const migrationSql = (name: string) => readFileSync(join(MIGRATIONS_DIR, name, "migration.sql"), "utf8");

/** prisma/migration-checksums.txt: `<sha256>  <migration>` per line, `#` comments. */
function recorded(): Map<string, string> {
  const lines = readFileSync(join(PRISMA_DIR, "migration-checksums.txt"), "utf8").split("\n");
  const sums = new Map<string, string>();
  for (const line of lines) {
    if (!line.trim() || line.startsWith("#")) continue;
    const [sum, name] = line.trim().split(/\s+/);
    sums.set(name!, sum!);
  }
  return sums;
}

/**
 * A published migration is never edited: Prisma records a migration once, so a database that
 * applied it keeps the SQL it had then, and a change reaches no deployment that is already past
 * it (four such edits once left databases without functions the code calls). A change goes into
 * a new migration; prisma/migration-checksums.txt records every migration's SHA-256.
 */
describe("published migrations", () => {
  const dirs = readdirSync(MIGRATIONS_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort();

  it("are each recorded in prisma/migration-checksums.txt, and nothing else is", () => {
    expect([...recorded().keys()].sort()).toEqual(dirs);
  });

  it.each(dirs)("%s is as it was published (its SHA-256 is the recorded one)", (name) => {
    const sum = createHash("sha256").update(readFileSync(join(MIGRATIONS_DIR, name, "migration.sql"))).digest("hex");
    expect(sum).toBe(recorded().get(name));
  });
});

describe("20261129130000_recreate_edited_functions", () => {
  it("gives a database migrated before the amended migrations the functions they now define", async () => {
    const client = new pg.Client({ connectionString: testEnv().databaseUrl });
    await client.connect();
    try {
      await client.query("BEGIN");
      // A database migrated before the amendments: neither function exists.
      await client.query("DROP FUNCTION agentrun_reclaim_run(text, text)");
      await client.query("DROP FUNCTION agentrun_nfc(text) CASCADE");
      await client.query(migrationSql("20261129130000_recreate_edited_functions"));
      const { rows } = await client.query<{ nfc: string; reclaim: boolean }>("SELECT agentrun_nfc($1) AS nfc, agentrun_reclaim_run('run_none', 'worker-none') AS reclaim", ["tra\u0300"]);
      expect(rows).toEqual([{ nfc: "trà", reclaim: false }]);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
  });
});
