import { createPrisma, type PrismaClient } from "./client";
import { statementNames } from "./statement-names";

// The jest global setup creates and migrates the test database and sets DATABASE_URL.
const databaseUrl = () => process.env.DATABASE_URL!;

describe("statementNames", () => {
  it("gives one SQL text one name, another text another, and no name past its limit", () => {
    const name = statementNames(2);
    const a = name({ sql: "SELECT 1" });
    expect(a).not.toBe("");
    expect(name({ sql: "SELECT 1" })).toBe(a);
    const b = name({ sql: "SELECT 2" });
    expect(b).not.toBe("");
    expect(b).not.toBe(a);
    expect(name({ sql: "SELECT 3" })).toBe("");
    expect(name({ sql: "SELECT 2" })).toBe(b);
  });
});

describe("createPrisma with prepared statements", () => {
  // One connection, so that pg_prepared_statements shows what the statements before it left.
  const clients: PrismaClient[] = [];
  const open = (preparedStatements?: boolean) => {
    const prisma = createPrisma({ databaseUrl: databaseUrl(), poolSize: 1, ...(preparedStatements === undefined ? {} : { preparedStatements }) });
    clients.push(prisma);
    return prisma;
  };
  afterAll(() => Promise.all(clients.map((c) => c.$disconnect())));

  const prepared = async (prisma: PrismaClient) =>
    (await prisma.$queryRaw<{ name: string; statement: string }[]>`SELECT name, statement FROM pg_prepared_statements ORDER BY prepare_time`).filter((s) =>
      s.statement.includes("agentrun_probe"),
    );

  it("prepares each statement once per connection and keeps answering each execution with its own parameters", async () => {
    const prisma = open();
    // More than the five custom plans after which PostgreSQL may switch to a generic one.
    for (let i = 0; i < 12; i++) {
      const [row] = await prisma.$queryRaw<{ v: number; agentrun_probe: string }[]>`SELECT ${i}::int * 2 AS v, ${`p${i}`}::text AS agentrun_probe`;
      expect(row).toEqual({ v: i * 2, agentrun_probe: `p${i}` });
    }
    const rows = await prepared(prisma);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.name).toMatch(/^agentrun_\d+$/);

    // Inside an interactive transaction, on the same connection, the named statement still serves.
    const inTx = await prisma.$transaction(async (tx) => {
      const [a] = await tx.$queryRaw<{ v: number }[]>`SELECT ${21}::int * 2 AS v, ${"tx"}::text AS agentrun_probe`;
      return a!.v;
    });
    expect(inTx).toBe(42);
    expect(await prepared(prisma)).toHaveLength(1);
  });

  it("prepares nothing when turned off", async () => {
    const prisma = open(false);
    for (let i = 0; i < 3; i++) await prisma.$queryRaw`SELECT ${i}::int AS v, ${"off"}::text AS agentrun_probe`;
    expect(await prepared(prisma)).toEqual([]);
  });
});
