/**
 * Entry point of the admin CLI (`npm run -s cli -- <command>`): runs one command line, prints its
 * JSON result or its one error line, and exits with its code. The environment is read only when
 * a command needs the database.
 */
import { createPrisma, type PrismaClient } from "@agentrun/db";
import { runCli, errorResult, type CliDeps, type CliResult } from "./cli";
import { loadAdminCliConfig } from "./config";
import { QUERY_TIMEOUT_MS, withStatementTimeout } from "./database-connection";
import { hearStreamErrors, printResult } from "./result-output";

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

/**
 * The database client, made on first use: `--help` and usage errors neither read the
 * environment (a bad `DATABASE_URL` does not stop them) nor connect. A bad environment throws
 * its one-line `ConfigError` from the command that needed it.
 */
function lazyDatabase(): { deps: CliDeps; disconnect(): Promise<void> } {
  let prisma: PrismaClient | undefined;
  return {
    deps: {
      get prisma() {
        // One command runs at a time; a small pool is plenty. The client connects lazily too.
        if (!prisma) {
          const config = loadAdminCliConfig();
          prisma = createPrisma({ databaseUrl: withStatementTimeout(config.DATABASE_URL), poolSize: 2, preparedStatements: config.DB_PREPARED_STATEMENTS, queryTimeoutMs: QUERY_TIMEOUT_MS });
        }
        return prisma;
      },
    },
    disconnect: async () => prisma?.$disconnect(),
  };
}

async function main(): Promise<number> {
  hearStreamErrors();
  const warnings = collectWarnings();
  const database = lazyDatabase();
  let result: CliResult;
  try {
    result = await runCli(process.argv.slice(2), database.deps);
  } catch (err) {
    result = errorResult(err);
  } finally {
    await database.disconnect().catch(() => {});
  }
  return printResult(result, warnings);
}

void main().then((code) => {
  process.exitCode = code;
});
