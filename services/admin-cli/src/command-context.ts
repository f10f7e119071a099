import type { PrismaClient } from "@agentrun/db";

/** The one JSON object a command prints on success. */
export type CliOutput = Record<string, unknown>;

/** What every command module receives: its dependencies and where to put its result. */
export interface CommandContext {
  prisma: PrismaClient;
  /** Records the command's result; the CLI prints it once the command has finished. */
  emit(output: CliOutput): void;
}
