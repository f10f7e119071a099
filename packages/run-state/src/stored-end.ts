/**
 * Ends already stored, read back: publishing a run's stored terminal event, and telling whether
 * an end whose answer was lost is the one stored.
 */
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";
import { readDbEvents, runWriterKey, RunEventWriter, type EventStore } from "@agentrun/events";

/**
 * Publishes the stored terminal event of an ended run, as the run log's current writer: a stored
 * end is always fit to publish, whoever holds the log. False (and nothing published) while the
 * run is still queued or running; true for an ended or deleted run.
 */
export async function publishStoredTerminal(deps: EventStore, runId: string): Promise<boolean> {
  const run = await deps.prisma.run.findUnique({ where: { id: runId }, select: { status: true, lastSeq: true } });
  if (!run) return true;
  if (run.status === "queued" || run.status === "running") return false;
  const [last] = await readDbEvents(deps, runId, run.lastSeq - 1);
  if (!last || !isTerminalEvent(last)) return true;
  const holder = (await deps.redis.get(runWriterKey(deps.redisPrefix, runId))) ?? undefined;
  await new RunEventWriter({ ...deps, runId, lastSeq: run.lastSeq, writerId: holder, onError: () => {} }).publishStored(last);
  return true;
}

/**
 * The stored terminal event of the run if it is `terminal`, stored by an earlier attempt of the
 * same end whose answer was lost: same type (or run_cancelled for run_completed: the end of a run
 * whose cancel was recorded is stored so), seq and error, and the run still held under `writerId`
 * (a taker changes it). Otherwise null, once the end someone else stored is published.
 */
export async function endStoredBefore(deps: EventStore, runId: string, terminal: RunEvent, writerId: string | undefined): Promise<RunEvent | null> {
  const run = await deps.prisma.run.findUnique({ where: { id: runId }, select: { lastSeq: true, workerId: true } });
  const [last] = run && run.lastSeq === terminal.seq ? await readDbEvents(deps, runId, run.lastSeq - 1) : [];
  const errorOf = (e: unknown) => (e as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const sameError = errorOf(last)?.code === errorOf(terminal)?.code && errorOf(last)?.message === errorOf(terminal)?.message;
  const sameType = last?.type === terminal.type || (last?.type === "run_cancelled" && terminal.type === "run_completed");
  const ours = sameType && last?.seq === terminal.seq && sameError && (writerId === undefined || run?.workerId === writerId);
  if (ours) return last;
  await publishStoredTerminal(deps, runId);
  return null;
}
