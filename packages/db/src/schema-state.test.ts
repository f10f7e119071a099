import pg from "pg";
import { testEnv } from "@agentrun/testing";
import { createPrisma, type PrismaClient } from "./client";
import { READY_CHECK_TIMEOUT_MS, readyCheck, schemaState } from "./schema-state";

/** The check of readiness and of the workers' heartbeat, on a client made by createPrisma. */
describe("schemaState", () => {
  let prisma: PrismaClient;
  beforeEach(() => {
    prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 1 });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await prisma.$disconnect();
  });

  it("answers ok within a readiness probe's wait while every connection of the pool is busy", async () => {
    // Prisma's promises start when awaited: `then` starts this one.
    const busy = prisma.$queryRaw`SELECT 1 AS one FROM pg_sleep(2)`.then(() => {});
    // The pool's one connection is taken by the statement above before the check starts.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    await expect(readyCheck(schemaState(prisma))).resolves.toBe("ok");
    expect(Date.now() - started).toBeLessThan(READY_CHECK_TIMEOUT_MS);
    await busy;
  });

  it("shares one connection among the checks that run together, and opens a new one a second later", async () => {
    const connects = jest.spyOn(pg.Client.prototype, "connect");
    const states = await Promise.all(Array.from({ length: 20 }, () => schemaState(prisma)));
    expect(states).toEqual(Array(20).fill("ok"));
    expect(connects).toHaveBeenCalledTimes(1);
    await expect(schemaState(prisma)).resolves.toBe("ok");
    expect(connects).toHaveBeenCalledTimes(1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await expect(schemaState(prisma)).resolves.toBe("ok");
    expect(connects).toHaveBeenCalledTimes(2);
  });

  it("answers on the pool when the server has no connection to spare, and rejects when the pool has none either", async () => {
    const role = `schema_check_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: testEnv().databaseUrl });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
    await admin.query(`GRANT SELECT ON _prisma_migrations TO ${role}`);
    const url = new URL(testEnv().databaseUrl);
    url.username = role;
    const limited = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
    try {
      // The pool holds the role's one connection.
      await limited.$queryRaw`SELECT 1 AS one`;
      await expect(schemaState(limited)).resolves.toBe("ok");
      // A role that may not connect at all: neither the check's own connection nor the pool gets one.
      await limited.$disconnect();
      await admin.query(`ALTER ROLE ${role} CONNECTION LIMIT 0`);
      const refused = createPrisma({ databaseUrl: url.toString(), poolSize: 1 });
      await expect(schemaState(refused)).rejects.toThrow();
      await refused.$disconnect();
    } finally {
      await limited.$disconnect();
      await admin.query(`DROP OWNED BY ${role}`);
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    }
  });

  it("rejects when the database cannot be reached", async () => {
    const closed = createPrisma({ databaseUrl: "postgresql://postgres@127.0.0.1:1/agentrun", poolSize: 1 });
    try {
      await expect(schemaState(closed)).rejects.toThrow(/ECONNREFUSED|reach|connect/i);
    } finally {
      await closed.$disconnect();
    }
  });
});
