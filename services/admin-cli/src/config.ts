import { z } from "zod";
import { databaseUrl, loadConfig } from "@agentrun/config";

/** The admin CLI's environment: only the database it administers. */
export const adminCliConfigSchema = z.object({
  /**
   * The database the CLI reads and writes.
   * @defaultValue "postgresql://postgres@127.0.0.1:5432/agentrun" (the `npm run dev` database)
   */
  DATABASE_URL: databaseUrl,
});

export type AdminCliConfig = z.infer<typeof adminCliConfigSchema>;

/** Parses the CLI's environment; throws a one-line `ConfigError` naming every bad variable. */
export function loadAdminCliConfig(env: Record<string, string | undefined> = process.env): AdminCliConfig {
  return loadConfig(adminCliConfigSchema, env);
}
