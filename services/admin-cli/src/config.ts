import { z } from "zod";
import { databaseUrl, dbPreparedStatements, loadConfig } from "@agentrun/config";

/** The admin CLI's environment: the database it administers, and how to talk to it. */
export const adminCliConfigSchema = z.object({
  /**
   * The database the CLI reads and writes.
   * @defaultValue "postgresql://postgres@127.0.0.1:5432/agentrun" (the `npm run dev` database)
   */
  DATABASE_URL: databaseUrl,
  /**
   * Named prepared statements, as the services run them: `false` behind a pooler in transaction
   * mode that does not track them, where a name an earlier process prepared fails the command.
   * @defaultValue true
   */
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
});

export type AdminCliConfig = z.infer<typeof adminCliConfigSchema>;

/** Parses the CLI's environment; throws a one-line `ConfigError` naming every bad variable. */
export function loadAdminCliConfig(env: Record<string, string | undefined> = process.env): AdminCliConfig {
  return loadConfig(adminCliConfigSchema, env);
}
