import { spawnSync } from "node:child_process";
import { createPrisma, REPO_ROOT, type PrismaClient } from "@agentrun/db";
import { testEnv } from "@agentrun/testing";

// The CLI as operators run it: its own process, one JSON line on stdout or one error line on
// stderr, and the exit code.
let prisma: PrismaClient;

beforeAll(() => {
  prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 2 });
});

afterAll(async () => {
  await prisma.$disconnect();
});

/** The test database's URL with another database name. */
function dbUrl(name: string): string {
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

describe("as a subprocess", () => {
  function cliWith(env: Record<string, string>, ...args: string[]) {
    const res = spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      encoding: "utf8",
      timeout: 30_000,
    });
    return { status: res.status, stdout: res.stdout, stderr: res.stderr };
  }
  const cli = (...args: string[]) => cliWith({}, ...args);

  it("prints exactly one JSON line and exits 0", async () => {
    const res = cli("org", "create", "--name", "Sub", "--plan", "starter", "--credits", "7");
    expect(res.status).toBe(0);
    expect(res.stderr).toBe("");
    const lines = res.stdout.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe("");
    const out = JSON.parse(lines[0]!);
    expect(Object.keys(out)).toEqual(["org_id"]);
    expect(await prisma.organization.findUnique({ where: { id: out.org_id } })).toMatchObject({ plan: "starter", creditBalance: 7 });

    const shown = cli("credits", "show", "--org", out.org_id);
    expect(shown).toEqual({ status: 0, stdout: '{"balance":7}\n', stderr: "" });
  });

  it("runs without named prepared statements when DB_PREPARED_STATEMENTS says so, as the services do", async () => {
    // (Behind a pooler in transaction mode, a statement name an earlier process prepared on the
    // same server connection fails the command.)
    const res = cliWith({ DB_PREPARED_STATEMENTS: "false" }, "org", "create", "--name", "Pooled", "--credits", "3");
    expect(res).toMatchObject({ status: 0, stderr: "" });
    expect(await prisma.organization.findUnique({ where: { id: JSON.parse(res.stdout).org_id } })).toMatchObject({ name: "Pooled", creditBalance: 3 });
    expect(cliWith({ DB_PREPARED_STATEMENTS: "maybe" }, "credits", "show", "--org", "org_x")).toMatchObject({
      status: 1, stdout: "", stderr: expect.stringMatching(/^error: invalid environment: DB_PREPARED_STATEMENTS: [^\n]*\n$/),
    });
  });

  it("prints one stderr line and exits 2 on a usage error", () => {
    expect(cli("org", "create", "--name", "Sub", "--plan", "gold")).toEqual({
      status: 2, stdout: "", stderr: "error: --plan must be one of free, starter, pro, enterprise\n",
    });
    expect(cli("nope")).toEqual({ status: 2, stdout: "", stderr: "error: unknown command 'nope'\n" });
  });

  it("answers --help and refuses a wrong command line whatever the environment holds", () => {
    const withBadUrl = (...args: string[]) => {
      const res = spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", ...args], {
        cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: "not a url" }, encoding: "utf8", timeout: 30_000,
      });
      return { status: res.status, stdout: res.stdout, stderr: res.stderr };
    };
    const help = withBadUrl("org", "create", "--help");
    expect(help).toMatchObject({ status: 0, stderr: "" });
    expect(JSON.parse(help.stdout).help).toContain("Usage: cli org create [options]");
    expect(withBadUrl("help", "help")).toMatchObject({ status: 0, stderr: "" });
    expect(withBadUrl("bogus")).toEqual({ status: 2, stdout: "", stderr: "error: unknown command 'bogus'\n" });
    expect(withBadUrl("org", "create", "--name", "A", "--plan", "gold")).toEqual({
      status: 2, stdout: "", stderr: "error: --plan must be one of free, starter, pro, enterprise\n",
    });
    // A command that needs the database reads the environment, and says what is wrong with it.
    expect(withBadUrl("credits", "show", "--org", "org_x")).toMatchObject({ status: 1, stdout: "", stderr: expect.stringMatching(/^error: invalid environment: DATABASE_URL: [^\n]*\n$/) });
  });

  it("exits 1 for an unknown org and for an unreachable database", () => {
    expect(cli("credits", "show", "--org", "org_missing")).toEqual({ status: 1, stdout: "", stderr: "error: no organization org_missing\n" });
    const down = spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", "credits", "show", "--org", "o"], {
      cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: "postgresql://postgres@127.0.0.1:1/none" }, encoding: "utf8", timeout: 30_000,
    });
    expect(down.status).toBe(1);
    expect(down.stdout).toBe("");
    expect(down.stderr).toMatch(/^error: the database is unreachable[^\n]*\n$/);
  });

  it("says in one line that the database refused the login when DATABASE_URL names an unknown role", () => {
    const url = new URL(testEnv().databaseUrl);
    url.username = `agentrun_no_role_${process.pid}`;
    const res = spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", "credits", "show", "--org", "o"], {
      cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: url.toString() }, encoding: "utf8", timeout: 30_000,
    });
    expect({ status: res.status, stdout: res.stdout, stderr: res.stderr }).toEqual({
      status: 1,
      stdout: "",
      stderr: `error: the database refused the login in DATABASE_URL (role "agentrun_no_role_${process.pid}" does not exist)\n`,
    });
  });

  it("says so when DATABASE_URL names a database that does not exist or is not migrated", () => {
    const withDb = (name: string) =>
      spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", "credits", "show", "--org", "o"], {
        cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: dbUrl(name) }, encoding: "utf8", timeout: 30_000,
      });
    const missing = withDb(`agentrun_missing_${process.pid}`);
    expect({ status: missing.status, stdout: missing.stdout }).toEqual({ status: 1, stdout: "" });
    expect(missing.stderr).toMatch(/^error: the database named in DATABASE_URL does not exist[^\n]*\n$/);

    const empty = `agentrun_empty_${process.pid}`;
    const admin = (sql: string) => spawnSync("psql", [dbUrl("postgres"), "-qc", sql], { encoding: "utf8" });
    expect(admin(`CREATE DATABASE ${empty}`).status).toBe(0);
    try {
      const unmigrated = withDb(empty);
      expect(unmigrated).toMatchObject({ status: 1, stdout: "", stderr: "error: the database is not migrated (run `npm run db:migrate:deploy`)\n" });
    } finally {
      admin(`DROP DATABASE IF EXISTS ${empty}`);
    }
  });
});
