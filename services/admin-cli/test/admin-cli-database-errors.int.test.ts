import { spawnSync } from "node:child_process";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { createPrisma, REPO_ROOT, type PrismaClient } from "@agentrun/db";
import { testEnv } from "@agentrun/testing";
import { runCli } from "../src/cli";
import { QUERY_TIMEOUT_MS, STATEMENT_TIMEOUT_MS, withStatementTimeout } from "../src/database-connection";

// Database failures as the operator sees them: one line, which tells a locked or silent
// database from an unreachable one, and nothing of Prisma's invocation dump.
let prisma: PrismaClient;

beforeAll(() => {
  prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 2 });
});

afterAll(async () => {
  await prisma.$disconnect();
});

/** The CLI as its own process, as operators run it. */
function cli(args: string[], databaseUrl = testEnv().databaseUrl) {
  const res = spawnSync(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", ...args], {
    cwd: REPO_ROOT, env: { ...process.env, DATABASE_URL: databaseUrl }, encoding: "utf8", timeout: 30_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

async function newOrg(): Promise<string> {
  const res = await runCli(["org", "create", "--name", `org-${Math.random().toString(36).slice(2)}`], { prisma });
  if (!("stdout" in res)) throw new Error(res.stderr);
  return res.stdout.org_id as string;
}

const BUSY = `error: the database did not answer within ${STATEMENT_TIMEOUT_MS / 1000} s (busy or locked); nothing was changed\n`;

describe("a statement waiting on a lock", () => {
  it("is cancelled by the server and reported as busy, not unreachable, and the grant is not made", async () => {
    const orgId = await newOrg();
    const res = await prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${orgId} FOR UPDATE`;
      return cli(["credits", "add", "--org", orgId, "--amount", "1"]);
    }, { timeout: 30_000 });
    expect(res).toEqual({ status: 1, stdout: "", stderr: BUSY });
    expect((await prisma.organization.findUniqueOrThrow({ where: { id: orgId } })).creditBalance).toBe(1000);
  });

  it("is not carried out once the lock is released, also outside a transaction (key revoke)", async () => {
    const orgId = await newOrg();
    const created = await runCli(["key", "create", "--org", orgId], { prisma });
    const keyId = ("stdout" in created ? created.stdout.key_id : "") as string;
    const res = await prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT id FROM api_keys WHERE id = ${keyId} FOR UPDATE`;
      return cli(["key", "revoke", "--key", keyId]);
    }, { timeout: 30_000 });
    expect(res).toEqual({ status: 1, stdout: "", stderr: BUSY });
    // Taking the row lock again waits for any update still queued on it.
    const after = await prisma.$transaction((tx) => tx.$queryRaw<{ revoked_at: Date | null }[]>`SELECT revoked_at FROM api_keys WHERE id = ${keyId} FOR UPDATE`);
    expect(after).toEqual([{ revoked_at: null }]);
  });

  it("without the server's timeout, ends at the client's wait: told apart from an unreachable database", async () => {
    const orgId = await newOrg();
    const impatient = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 2, queryTimeoutMs: 300 });
    try {
      const res = await prisma.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${orgId} FOR UPDATE`;
        return runCli(["credits", "add", "--org", orgId, "--amount", "1"], { prisma: impatient });
      }, { timeout: 30_000 });
      expect(res).toEqual({ exitCode: 1, stderr: expect.stringContaining(`error: the database stopped answering (no reply within ${QUERY_TIMEOUT_MS / 1000} s)`) });
    } finally {
      await impatient.$disconnect();
    }
  });
});

describe("the connection the CLI opens", () => {
  it("sets the statement timeout after any options DATABASE_URL has", async () => {
    const url = new URL(testEnv().databaseUrl);
    url.searchParams.set("options", "-c statement_timeout=60000 -c application_name=own");
    const db = createPrisma({ databaseUrl: withStatementTimeout(url.toString()), poolSize: 1 });
    try {
      const rows = await db.$queryRaw<{ timeout: string; app: string }[]>`SELECT current_setting('statement_timeout') AS timeout, current_setting('application_name') AS app`;
      expect(rows).toEqual([{ timeout: `${STATEMENT_TIMEOUT_MS / 1000}s`, app: "own" }]);
    } finally {
      await db.$disconnect();
    }
  });
});

describe("other database failures", () => {
  it("with sslmode=require against a server without TLS: one line naming the cause, no warning or Prisma dump", async () => {
    // The test server speaks no TLS.
    expect(await prisma.$queryRaw`SELECT current_setting('ssl') AS ssl`).toEqual([{ ssl: "off" }]);
    for (const sslmode of ["require", "prefer"]) {
      const url = new URL(testEnv().databaseUrl);
      url.searchParams.set("sslmode", sslmode);
      expect(cli(["credits", "show", "--org", "org_x"], url.toString())).toEqual({
        status: 1, stdout: "", stderr: "error: the database does not accept TLS connections (check sslmode in DATABASE_URL)\n",
      });
    }
  });

  it("too many connections: said so, not taken for an unreachable database", async () => {
    const role = `agentrun_one_connection_${process.pid}_${Date.now().toString(36)}`;
    await prisma.$executeRawUnsafe(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
    const url = new URL(testEnv().databaseUrl);
    url.username = role;
    // The role's only connection, held.
    const holder = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
    const db = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
    try {
      await holder.$queryRaw`SELECT 1`;
      const res = await runCli(["credits", "show", "--org", "org_x"], { prisma: db });
      expect(res).toEqual({ exitCode: 1, stderr: expect.stringMatching(/^error: the database refused the connection: too many connections/) });
    } finally {
      await Promise.all([db.$disconnect(), holder.$disconnect()]);
      await prisma.$executeRawUnsafe(`DROP ROLE ${role}`);
    }
  });

  it("a server that takes connections but never answers: unreachable, not busy, also for a command in a transaction", async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const url = new URL(testEnv().databaseUrl);
    url.host = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const db = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
    try {
      for (const args of [["org", "create", "--name", "Silent"], ["credits", "show", "--org", "org_x"]]) {
        const res = await runCli(args, { prisma: db });
        expect(res).toEqual({ exitCode: 1, stderr: expect.stringMatching(/^error: the database is unreachable/) });
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      await db.$disconnect();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("an error the CLI has no words for: the server's message, not Prisma's invocation and source excerpt", async () => {
    const role = `agentrun_no_grants_${process.pid}`;
    await prisma.$executeRawUnsafe(`CREATE ROLE ${role} LOGIN`);
    const url = new URL(testEnv().databaseUrl);
    url.username = role;
    const db = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
    try {
      expect(await runCli(["credits", "show", "--org", "org_x"], { prisma: db })).toEqual({
        exitCode: 1, stderr: "error: database failure: permission denied for table organizations",
      });
    } finally {
      await db.$disconnect();
      await prisma.$executeRawUnsafe(`DROP ROLE ${role}`);
    }
  });
});
