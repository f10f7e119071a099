import { createPrisma, type PrismaClient } from "@agentrun/db";
import { testEnv } from "@agentrun/testing";
import { runCli, type CliResult } from "../src/cli";

/** The CLI run in-process on the test database, as a test file uses it. */
export interface TestCli {
  /** The test database (open between the file's beforeAll and afterAll). */
  readonly prisma: PrismaClient;
  /** Runs one command line, e.g. `run("org", "create", "--name", "Acme")`. */
  run(...argv: string[]): Promise<CliResult>;
  /** Runs one command line that must succeed: its JSON output. */
  ok(...argv: string[]): Promise<Record<string, any>>;
}

/** For the enclosing test file: a {@link TestCli}, its database opened before the tests and closed after them. */
export function testCli(poolSize = 2): TestCli {
  let prisma: PrismaClient | undefined;
  beforeAll(() => {
    prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize });
  });
  afterAll(async () => {
    await prisma?.$disconnect();
  });
  const cli: TestCli = {
    get prisma() {
      if (!prisma) throw new Error("testCli's database is open only while the file's tests run");
      return prisma;
    },
    run: (...argv) => runCli(argv, { prisma: cli.prisma }),
    async ok(...argv) {
      const res = await cli.run(...argv);
      if (!("stdout" in res)) throw new Error(`expected success for ${argv.join(" ")}, got ${JSON.stringify(res)}`);
      return res.stdout;
    },
  };
  return cli;
}
