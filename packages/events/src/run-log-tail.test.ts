import { randomUUID } from "node:crypto";
import { newId, type PrismaClient } from "@agentrun/db";
import { Redis } from "@agentrun/redis";
import { createTestRun, testEnv, testPrisma } from "@agentrun/testing";
import { runLogKey } from "./keys";
import { LOG_PAGE_ENTRIES, readLogAfter } from "./run-log-tail";
import { readStoredEvents } from "./stored-events";

// Reads of a run's Redis log from a seq on: only the entries that can hold later events, on the
// real Redis. The connection is the test's own, its replies counted (the strings each one held),
// to show how much of the log reached the reader.
let prisma: PrismaClient;
const redis = new Redis(testEnv().redisUrl);
const redisPrefix = `${testEnv().redisPrefix}:tailread:${randomUUID().slice(0, 8)}`;
/** Strings in each reply received on `redis`, in order. */
const replies: number[] = [];
const stringsIn = (reply: unknown): number => (Array.isArray(reply) ? reply.reduce((n: number, r) => n + stringsIn(r), 0) : typeof reply === "string" || Buffer.isBuffer(reply) ? 1 : 0);
const send = redis.sendCommand.bind(redis);
redis.sendCommand = ((...args: Parameters<Redis["sendCommand"]>) => {
  args[0].promise.then((r) => replies.push(stringsIn(r)), () => {});
  return send(...args);
}) as Redis["sendCommand"];
/** Strings received while `read` ran, and the most in one reply. */
async function counted<T>(read: () => Promise<T>): Promise<{ value: T; received: number; largest: number }> {
  replies.length = 0;
  const value = await read();
  await new Promise((r) => setImmediate(r));
  return { value, received: replies.reduce((a, b) => a + b, 0), largest: Math.max(0, ...replies) };
}

const store = () => ({ prisma, redis, redisPrefix });
const event = (seq: number, type = "text_chunk") => ({ seq, type, content: `c${seq}` });
const one = (seq: number, type?: string) => JSON.stringify(event(seq, type));
const many = (...seqs: number[]) => JSON.stringify(seqs.map((s) => event(s)));
const seqsOf = (events: { seq: number }[]) => events.map((e) => e.seq);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** A run (not in PostgreSQL unless the test stores batches) whose log holds `entries`. */
async function logOf(entries: string[]): Promise<string> {
  const runId = newId("run");
  const key = runLogKey(redisPrefix, runId);
  const pipeline = redis.pipeline();
  for (let i = 0; i < entries.length; i += 10_000) pipeline.rpush(key, ...entries.slice(i, i + 10_000));
  await pipeline.exec();
  return runId;
}

const LONG = 200_000;
let longRun: string;

beforeAll(async () => {
  prisma = testPrisma(testEnv().databaseUrl);
  longRun = await logOf(range(2, LONG).map((s) => one(s)));
});
afterAll(async () => {
  const keys = await redis.keys(`${redisPrefix}:*`);
  if (keys.length) await redis.unlink(...keys);
  redis.disconnect();
  await prisma.$disconnect();
});

describe("a resume near the end of a long log", () => {
  it("returns exactly the events after the cursor and reads a handful of entries, not the whole log", async () => {
    const { value, received, largest } = await counted(() => readStoredEvents(store(), longRun, LONG - 10));
    expect(seqsOf(value)).toEqual(range(LONG - 9, LONG));
    expect(received).toBeLessThanOrEqual(20);
    expect(largest).toBeLessThanOrEqual(10);
  });

  it("reads only the last entry at the end of the log and past it", async () => {
    for (const after of [LONG, LONG + 5]) {
      const { value, received } = await counted(() => readStoredEvents(store(), longRun, after));
      expect(value).toEqual([]);
      expect(received).toBe(1);
    }
  });

  it("reads from the start of the log in pages, none longer than LOG_PAGE_ENTRIES", async () => {
    const { value, largest } = await counted(() => readStoredEvents(store(), longRun, 0));
    expect(value).toHaveLength(LONG - 1);
    expect(value.every((e, i) => e.seq === i + 2)).toBe(true);
    expect(largest).toBeLessThanOrEqual(LOG_PAGE_ENTRIES);
  });

  it("finds the right entry wherever the cursor falls", async () => {
    for (const after of [1, 4999, 77_777, 100_000, 150_001, LONG - 1]) {
      const entries = await readLogAfter(store(), longRun, after);
      expect(JSON.parse(entries[0]!).seq).toBe(after + 1);
      expect(JSON.parse(entries.at(-1)!).seq).toBe(LONG);
    }
  });
});

describe("readLogAfter and readStoredEvents on logs of several events per entry", () => {
  // Entries: 2 | 3,4,5 | 6 | 7,8 | 9 (the end).
  const entries = [one(2), many(3, 4, 5), one(6), many(7, 8), one(9, "run_completed")];
  let runId: string;
  beforeAll(async () => {
    runId = await logOf(entries);
  });

  it.each([
    [0, 0, range(2, 9)],
    [1, 0, range(2, 9)],
    [3, 1, range(4, 9)], // inside an entry: the entry is read, the events up to the cursor dropped
    [5, 2, range(6, 9)], // at an entry's last event: from the next entry
    [8, 4, [9]],
    [9, 4, []], // at the end: the last entry still comes back (a reader past the end learns it)
    [50, 4, []],
  ])("after seq %i: entries from #%i, events %j", async (after, firstEntry, seqs) => {
    expect(await readLogAfter(store(), runId, after)).toEqual(entries.slice(firstEntry));
    expect(seqsOf(await readStoredEvents(store(), runId, after))).toEqual(seqs);
  });

  it("answers an empty log with nothing", async () => {
    const missing = newId("run");
    expect(await readLogAfter(store(), missing, 0)).toEqual([]);
    expect(await readLogAfter(store(), missing, 10)).toEqual([]);
    expect(await readStoredEvents(store(), missing, 3)).toEqual([]);
  });

  it("merges the tail read with what PostgreSQL holds, each seq once", async () => {
    const stored = await createTestRun(prisma, "running");
    await prisma.runEventBatch.create({ data: { runId: stored, firstSeq: 2, lastSeq: 6, events: range(2, 6).map((s) => event(s)) } });
    await redis.rpush(runLogKey(redisPrefix, stored), ...entries);
    expect(seqsOf(await readStoredEvents(store(), stored, 4))).toEqual(range(5, 9));
  });
});

describe("logs the search cannot read everywhere", () => {
  it("reads more, never less, around entries that are not events", async () => {
    const entries = [one(2), "not json", one(3), "{}", "[]", one(4), many(5, 6), "null", one(7)];
    const runId = await logOf(entries);
    for (let after = 0; after <= 7; after++) {
      expect(seqsOf(await readStoredEvents(store(), runId, after))).toEqual(range(after + 1, 7).filter((s) => s >= 2));
    }
  });

  it("keeps a terminal event published again after itself", async () => {
    const runId = await logOf([one(2), one(3), one(4, "run_cancelled"), one(4, "run_cancelled")]);
    expect(seqsOf(await readStoredEvents(store(), runId, 3))).toEqual([4]);
    expect(await readLogAfter(store(), runId, 4)).toEqual([one(4, "run_cancelled")]);
  });

  it("takes entries appended while a long read pages through the log", async () => {
    const runId = await logOf(range(2, LOG_PAGE_ENTRIES + 501).map((s) => one(s)));
    const key = runLogKey(redisPrefix, runId);
    const reading = readLogAfter(store(), runId, 1);
    const appended = redis.rpush(key, one(LOG_PAGE_ENTRIES + 502), one(LOG_PAGE_ENTRIES + 503));
    const [entries] = await Promise.all([reading, appended]);
    expect(entries.map((e) => JSON.parse(e).seq)).toEqual(range(2, LOG_PAGE_ENTRIES + 503));
  });
});
