import { testEnv } from "@agentrun/testing";
import { createPrisma, type PrismaClient } from "./client";
import { newId } from "./ids";

/**
 * A database whose time zone is not UTC (a server set up in the machine's local zone), emulated
 * with the session option a connection string can carry: the client must still read and write
 * instants as they are.
 */
describe("createPrisma in a database whose time zone is not UTC", () => {
  let prisma: PrismaClient;
  beforeAll(() => {
    const url = new URL(testEnv().databaseUrl);
    url.searchParams.set("options", "-c TimeZone=Asia/Kolkata");
    prisma = createPrisma({ databaseUrl: url.toString(), poolSize: 2 });
  });
  afterAll(() => prisma.$disconnect());

  const minutesFromNow = (at: Date) => Math.abs(at.getTime() - Date.now()) / 60_000;

  it("runs every session in UTC", async () => {
    const rows = await prisma.$queryRaw<{ TimeZone: string }[]>`SHOW TimeZone`;
    expect(rows[0]?.TimeZone).toBe("UTC");
  });

  it("reads a time the database wrote as the instant it is", async () => {
    const [row] = await prisma.$queryRaw<{ at: Date }[]>`SELECT now() AS at`;
    expect(minutesFromNow(row!.at)).toBeLessThan(1);
  });

  it("writes a time the client set as the instant it is", async () => {
    const id = newId("org");
    try {
      const created = await prisma.organization.create({ data: { id, name: "time zone check" } });
      const [row] = await prisma.$queryRaw<{ ms: number }[]>`SELECT (extract(epoch FROM created_at) * 1000)::float8 AS ms FROM organizations WHERE id = ${id}`;
      expect(Math.abs(row!.ms - created.createdAt.getTime())).toBeLessThan(1);
      expect(minutesFromNow(created.createdAt)).toBeLessThan(1);
    } finally {
      await prisma.organization.deleteMany({ where: { id } });
    }
  });
});
