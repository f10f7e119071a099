import type { PrismaClient } from "@agentrun/db";
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";

/**
 * Events come only from this service's workers, so a shape check is enough (a full schema parse
 * per event would be most of a stream's CPU).
 */
export function asEvent(value: unknown): RunEvent | null {
  const e = value as RunEvent | null;
  return e && typeof e === "object" && Number.isInteger(e.seq) && typeof e.type === "string" ? e : null;
}

/** The events of `batches` with seq > `afterSeq` (and the terminal one, with `keepEnd`), each seq once, in order. */
function eventsOf(batches: { events: unknown }[], afterSeq: number, keepEnd = false): RunEvent[] {
  // A batch may hold events of a later one: one written again with more after its write failed.
  const bySeq = new Map<number, RunEvent>();
  for (const b of batches) {
    if (!Array.isArray(b.events)) continue;
    for (const value of b.events) {
      const e = asEvent(value);
      if (e && (e.seq > afterSeq || (keepEnd && isTerminalEvent(e)))) bySeq.set(e.seq, e);
    }
  }
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}

/**
 * The events of a run stored in PostgreSQL with seq > `afterSeq`, in order, from the batches that
 * hold any (each seq once, also where batches overlap).
 */
export async function readDbEvents(store: { prisma: PrismaClient }, runId: string, afterSeq = 0): Promise<RunEvent[]> {
  const batches = await store.prisma.runEventBatch.findMany({ where: { runId, lastSeq: { gt: afterSeq } }, orderBy: { firstSeq: "asc" }, select: { events: true } });
  return eventsOf(batches, afterSeq);
}

/**
 * {@link readDbEvents}, and the run's terminal event also when it is at or before `afterSeq`
 * (in the same statement): a reader past a run's end (a client holding events the store lost)
 * learns from PostgreSQL too that the run has ended.
 */
export async function readDbEventsOrEnd(store: { prisma: PrismaClient }, runId: string, afterSeq: number): Promise<RunEvent[]> {
  const batches = await store.prisma.$queryRaw<{ events: unknown }[]>`
    SELECT b.events FROM run_event_batches b
    WHERE b.run_id = ${runId} AND (b.last_seq > ${afterSeq}::integer OR b.last_seq = (
      SELECT r.last_seq FROM runs r WHERE r.id = ${runId} AND r.status NOT IN ('queued', 'running') AND r.last_seq <= ${afterSeq}::integer))
    ORDER BY b.first_seq`;
  return eventsOf(batches, afterSeq, true);
}
