import { ensureDatabase, migrateDeploy, type PrismaClient } from "@agentrun/db";
import { startPrivatePostgres, type PrivatePostgres } from "./private-servers";
import { startStack, type Stack, type StackOptions } from "./stack";
import { testPrisma } from "./tenant";

export interface PrivatePostgresStack {
  /** The cluster, which the test may stop, start, freeze and thaw. */
  pg: PrivatePostgres;
  stack: Stack;
  /** A client of the cluster's migrated database, for the test's own reads and set-up. */
  prisma: PrismaClient;
  /** Stops the stack, then removes the cluster (thawed first if frozen). */
  stop(): Promise<void>;
}

/** The whole stack on a PostgreSQL cluster of the test's own, migrated, for tests that break PostgreSQL. */
export async function startStackOnPrivatePostgres(opts: StackOptions = {}): Promise<PrivatePostgresStack> {
  const pg = await startPrivatePostgres();
  let stack: Stack;
  try {
    await ensureDatabase(pg.url);
    await migrateDeploy(pg.url);
    stack = await startStack({ ...opts, env: { ...opts.env, DATABASE_URL: pg.url } });
  } catch (err) {
    // The cluster runs detached: it would outlive the test run.
    await pg.destroy();
    throw err;
  }
  const prisma = testPrisma(pg.url);
  return {
    pg,
    stack,
    prisma,
    async stop() {
      try {
        pg.thaw(); // services stop faster on a database that answers
      } catch {
        /* not running */
      }
      await stack.stop();
      await prisma.$disconnect();
      await pg.destroy();
    },
  };
}
