// Runs Prisma Migrate offline: the pinned Prisma 6.19.3 CLI with the in-process WebAssembly
// schema engine configured in prisma/migrate.config.ts. Usage mirrors `prisma migrate ...`.
// The migrations it writes are standard Prisma Migrate output, so a machine with Prisma's native
// engine can run plain `prisma migrate deploy` on the same folder.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import pg from "pg";

const root = path.resolve(import.meta.dirname, "..");
const src = path.join(root, "prisma/schema.prisma");
const dir = path.join(root, "prisma/migrations");
const cli = path.join(path.dirname(createRequire(import.meta.url).resolve("prisma6/package.json")), "build/index.js");

// The services' default (DEFAULT_DATABASE_URL in packages/config).
process.env.DATABASE_URL ||= "postgresql://postgres@127.0.0.1:5432/agentrun";

/**
 * Creates the database named by `databaseUrl` when the server says it does not exist (3D000),
 * as Prisma's native engine does for `migrate deploy`, `dev` and `reset`; the in-process engine
 * configured here connects to that database itself and cannot. The same as `ensureDatabase` in
 * packages/db, which this plain Node script cannot import, but it asks the database first, so a
 * role that may not connect to the `postgres` maintenance database still migrates an existing one.
 */
async function createDatabaseIfMissing(databaseUrl) {
  const probe = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await probe.connect();
    return;
  } catch (err) {
    // Anything else (server down, bad credentials) is Prisma's to report.
    if (err?.code !== "3D000") return;
  } finally {
    await probe.end().catch(() => {});
  }
  const url = new URL(databaseUrl);
  const database = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
    console.log(`Created database "${database}".`);
  } catch (err) {
    if (err?.code === "42P04") return; // created concurrently
    process.stderr.write(`error: database "${database}" does not exist and could not be created: ${err?.message ?? err}\n`);
    process.exit(1);
  } finally {
    await admin.end().catch(() => {});
  }
}

// Prisma 6 requires `url` in the datasource block, which Prisma 7 rejects: derive a copy with
// the url and without generators (so Prisma 6 never writes a client).
const derived = fs
  .readFileSync(src, "utf8")
  .replace(/^\s*generator\s+\w+\s*\{[^}]*\}\s*$/gm, "")
  .replace(/^(\s*datasource\s+\w+\s*\{)/m, '$1\n  url = env("DATABASE_URL")')
  // `moduleFormat` and other Prisma 7 generator options vanish with the generator block above.
  ;
if (!derived.includes('url = env("DATABASE_URL")')) throw new Error("no datasource block in prisma/schema.prisma");
const schema = path.join(root, "node_modules/.cache/prisma-migrate/schema.prisma");
fs.mkdirSync(path.dirname(schema), { recursive: true });
fs.writeFileSync(schema, derived);

// `migrate diff` in 6.19 rejects --schema; map the schema path argument to the derived copy.
const args = process.argv.slice(2).map((a) => (path.resolve(a) === src ? schema : a));
const [cmd, sub] = args;
if (cmd === "migrate" && ["deploy", "dev", "reset"].includes(sub)) await createDatabaseIfMissing(process.env.DATABASE_URL);
if (cmd === "migrate" && (sub === "dev" || sub === "reset")) args.push("--skip-generate", "--skip-seed");
args.push("--config", path.join(root, "prisma/migrate.config.ts"));
if (!(cmd === "migrate" && sub === "diff")) args.push("--schema", schema);

const list = () => (fs.existsSync(dir) ? fs.readdirSync(dir) : []);
const before = new Set(list());
const createOnly = cmd === "migrate" && sub === "dev" && args.includes("--create-only");
const r = spawnSync(process.execPath, [cli, ...args], {
  stdio: ["inherit", "inherit", createOnly ? "pipe" : "inherit"],
  encoding: "utf8",
  env: {
    ...process.env,
    // Point every engine at /bin/false: nothing may be downloaded, and an accidental use of a
    // native engine fails loudly instead of silently doing nothing (as /bin/true would).
    PRISMA_CLI_QUERY_ENGINE_TYPE: "binary",
    PRISMA_QUERY_ENGINE_BINARY: "/bin/false",
    PRISMA_SCHEMA_ENGINE_BINARY: "/bin/false",
    PRISMA_HIDE_UPDATE_MESSAGE: "1",
    CHECKPOINT_DISABLE: "1",
  },
});
// `migrate dev --create-only` writes the migration and then fails freeing the wasm engine twice
// ("null pointer passed to rust"); that one case is a success.
if (createOnly) {
  process.stderr.write(r.stderr ?? "");
  const created = list().filter((d) => !before.has(d));
  if (r.status !== 0 && /null pointer passed to rust/.test(r.stderr) && created.length === 1) process.exit(0);
}
process.exit(r.status ?? 1);
