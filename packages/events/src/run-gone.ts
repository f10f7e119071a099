import type { PrismaClient } from "@agentrun/db";

/**
 * A run that its reader had looked up is gone: its task was deleted, taking the run and its
 * stored events, before the reader had sent anything of it. The caller can still answer 404.
 */
export class RunGoneError extends Error {
  constructor(readonly runId: string) {
    super(`Run '${runId}' was deleted with its task while its events were being read.`);
    this.name = "RunGoneError";
  }
}

/**
 * Whether the run's row is still there. Read after a run's events, a row still there shows that
 * the read saw PostgreSQL before any delete of the run: a task's delete takes its runs and their
 * events in one statement.
 */
export async function runExists(prisma: PrismaClient, runId: string): Promise<boolean> {
  return (await prisma.run.findUnique({ where: { id: runId }, select: { id: true } })) !== null;
}
