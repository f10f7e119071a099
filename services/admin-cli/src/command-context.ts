import type { PrismaClient } from "@agentrun/db";

/** The one JSON object a command prints on success. */
export type CliOutput = Record<string, unknown>;

/** What every command module receives: its dependencies and where to put its result. */
export interface CommandContext {
  prisma: PrismaClient;
  /**
   * Records the command's result; the CLI prints it once the command has finished. A command that
   * changed the database says what it changed (`organization org_… was created`), never quoting a
   * secret: that is the error line's news when stdout is closed and the result cannot be written.
   */
  emit(output: CliOutput, change?: string): void;
}
