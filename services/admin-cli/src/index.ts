/**
 * Entry point of the admin CLI (`npm run -s cli -- <command>`): reads the environment, runs one
 * command line, prints its JSON result or its one error line, and exits with its code.
 */
import { createPrisma } from "@agentrun/db";
import { runCli, errorResult, type CliResult } from "./cli";
import { loadAdminCliConfig } from "./config";
import { QUERY_TIMEOUT_MS, withStatementTimeout } from "./database-connection";

/**
 * Takes over the printing of process warnings (e.g. pg-connection-string's about `sslmode`,
 * ten lines long): Node's printer is removed and each warning is kept as one `warning: ` line,
 * printed after a successful result. A failure prints its one error line only.
 */
function collectWarnings(): string[] {
  const lines: string[] = [];
  process.removeAllListeners("warning");
  process.on("warning", (w) => lines.push(`warning: ${w.message.replace(/\s*\n\s*/g, " ").trim()}`));
  return lines;
}

async function main(): Promise<number> {
  const warnings = collectWarnings();
  let result: CliResult;
  let disconnect = async (): Promise<void> => {};
  try {
    const config = loadAdminCliConfig();
    // One command runs at a time; a small pool is plenty. The client connects lazily, so
    // `--help` and usage errors never touch the database.
    const prisma = createPrisma({ databaseUrl: withStatementTimeout(config.DATABASE_URL), poolSize: 2, queryTimeoutMs: QUERY_TIMEOUT_MS });
    disconnect = () => prisma.$disconnect();
    result = await runCli(process.argv.slice(2), { prisma });
  } catch (err) {
    result = errorResult(err);
  } finally {
    await disconnect().catch(() => {});
  }
  if ("stdout" in result) {
    process.stdout.write(`${JSON.stringify(result.stdout)}\n`);
    for (const line of warnings) process.stderr.write(`${line}\n`);
  } else {
    process.stderr.write(`${result.stderr}\n`);
  }
  return result.exitCode;
}

void main().then((code) => {
  process.exitCode = code;
});
