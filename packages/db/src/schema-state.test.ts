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

  it("rejects when the database cannot be reached", async () => {
    const closed = createPrisma({ databaseUrl: "postgresql://postgres@127.0.0.1:1/agentrun", poolSize: 1 });
    try {
      await expect(schemaState(closed)).rejects.toThrow();
    } finally {
      await closed.$disconnect();
    }
  });
});
