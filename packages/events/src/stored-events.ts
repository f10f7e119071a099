/**
 * What is stored of a run's events: PostgreSQL's batches and the run's Redis log, read together
 * and merged by seq.
 */
import type { Redis } from "ioredis";
import type { PrismaClient } from "@agentrun/db";
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";
import { asEvent, readDbEvents } from "./db-events";
import { readLogAfter } from "./run-log-tail";
import { RunGoneError, runExists } from "./run-gone";

export interface EventStore {
  prisma: PrismaClient;
  redis: Redis;
  redisPrefix: string;
}

/** The events of one log entry or channel message: one event, or a JSON array of them. */
export function parseEvents(json: string): RunEvent[] {
  try {
    const value: unknown = JSON.parse(json);
    const list = Array.isArray(value) ? value : [value];
    return list.map(asEvent).filter((e): e is RunEvent => e !== null);
  } catch {
    return [];
  }
}

/**
 * Every stored event of a run with seq > `afterSeq`, in order: the union of PostgreSQL (batched,
 * durable) and the run's Redis log (everything emitted, until it expires).
 */
export async function readStoredEvents(store: EventStore, runId: string, afterSeq = 0): Promise<RunEvent[]> {
  const [rows, log] = await Promise.allSettled(storeReads(store, runId, afterSeq));
  if (rows.status === "rejected") throw rows.reason;
  if (log.status === "fulfilled") return mergeEvents(rows.value, log.value, afterSeq);
  // Redis out of reach: a run whose end PostgreSQL holds is all there (an end is stored with
  // every event its writer had); of a run still going, the log may hold what is not stored yet.
  if (rows.value.some(isTerminalEvent)) return rows.value;
  throw log.reason;
}

/**
 * {@link readStoredEvents} for a reader that looked the run up first: rejects with
 * {@link RunGoneError} when the run has gone since. A task's delete removes the run's rows from
 * PostgreSQL (run_started, seq 1, is only there) before its Redis log, so in between the log
 * alone answers, from seq 2 on; after both, nothing does. Events missing at the start of what is
 * read (none at all included) are therefore checked against the run's row, read after them.
 */
export async function readFoundRunEvents(store: EventStore, runId: string, afterSeq = 0): Promise<RunEvent[]> {
  const events = await readStoredEvents(store, runId, afterSeq);
  if (events[0]?.seq !== afterSeq + 1 && !(await runExists(store.prisma, runId))) throw new RunGoneError(runId);
  return events;
}

/**
 * Of a run's stored events after `afterSeq` (in seq order), those a reader can take as all there
 * is up to some seq: up to the first missing one. A seq can be missing for a moment from both
 * stores (its append to the log failed, its batch is not written yet), and a reader resuming past
 * it would never get it. A run whose end is stored is whole: an end is stored with every event its
 * writer had, and a seq still missing then is lost for good.
 */
export function withoutGaps(events: RunEvent[], afterSeq: number): RunEvent[] {
  if (events.some(isTerminalEvent)) return events;
  let i = 0;
  while (i < events.length && events[i]!.seq === afterSeq + 1 + i) i++;
  return events.slice(0, i);
}

/**
 * The reads, started together, of a run's events in PostgreSQL with seq > `afterSeq` and of the
 * entries of its Redis log that can hold any (see readLogAfter: not the whole log of a long run).
 */
function storeReads(store: EventStore, runId: string, afterSeq: number): [Promise<RunEvent[]>, Promise<string[]>] {
  return [readDbEvents(store, runId, afterSeq), readLogAfter(store, runId, afterSeq)];
}

/**
 * The events of a run's Redis log that PostgreSQL does not hold (those its worker emitted but did
 * not get to store), in order, the last seq stored anywhere, and all the events of both stores.
 */
export async function readUnstoredEvents(store: EventStore, runId: string): Promise<{ events: RunEvent[]; lastSeq: number; all: RunEvent[] }> {
  const [rows, log] = await Promise.all(storeReads(store, runId, 0));
  const inDb = new Set(rows.map((e) => e.seq));
  const all = mergeEvents(rows, log, 0);
  return { events: all.filter((e) => !inDb.has(e.seq)), lastSeq: all.at(-1)?.seq ?? 0, all };
}

/** Stored events and log entries merged by seq: each seq once, in order. */
export function mergeEvents(stored: RunEvent[], log: string[], afterSeq: number): RunEvent[] {
  const bySeq = new Map<number, RunEvent>();
  for (const e of stored) bySeq.set(e.seq, e);
  for (const json of log) {
    for (const e of parseEvents(json)) if (e.seq > afterSeq && !bySeq.has(e.seq)) bySeq.set(e.seq, e);
  }
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}
