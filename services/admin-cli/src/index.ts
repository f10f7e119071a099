/**
 * Entry point of the admin CLI (`npm run -s cli -- <command>`): reads the environment, runs one
 * command line, prints its JSON result or its one error line, and exits with its code.
 */
import { createPrisma } from "@agentrun/db";
import { runCli, errorResult, type CliResult } from "./cli";
import { loadAdminCliConfig } from "./config";

async function main(): Promise<number> {
  let result: CliResult;
  let disconnect = async (): Promise<void> => {};
  try {
    const config = loadAdminCliConfig();
    // One command runs at a time; a small pool is plenty. The client connects lazily, so
    // `--help` and usage errors never touch the database.
    const prisma = createPrisma({ databaseUrl: config.DATABASE_URL, poolSize: 2 });
    disconnect = () => prisma.$disconnect();
    result = await runCli(process.argv.slice(2), { prisma });
  } catch (err) {
    result = errorResult(err);
  } finally {
    await disconnect().catch(() => {});
  }
  if ("stdout" in result) process.stdout.write(`${JSON.stringify(result.stdout)}\n`);
  else process.stderr.write(`${result.stderr}\n`);
  return result.exitCode;
}

void main().then((code) => {
  process.exitCode = code;
});
