import { readFile } from "node:fs/promises";
import path from "node:path";
import type { PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { readDbEvents, runLogKey, RunEventWriter } from "@agentrun/events";
import { createTestRun, eventually, startPgRelay, testEnv, testPrisma, type PgRelay } from "@agentrun/testing";
import { failRun, finishRun } from "./finish-run";

let prisma: PrismaClient;
let redis: Redis;
// A second client whose connections pass a relay that cuts them where a test says: its writes
// meet real lost connections.
let relay: PgRelay;
let relayed: PrismaClient;
const redisPrefix = `${testEnv().redisPrefix}:batches`;

beforeAll(async () => {
  prisma = testPrisma(testEnv().databaseUrl);
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
  relay = await startPgRelay(testEnv().databaseUrl);
  relayed = testPrisma(relay.url);
});
afterAll(async () => {
  redis.disconnect();
  await relayed.$disconnect();
  await relay.close();
  await prisma.$disconnect();
});

const deps = () => ({ prisma, redis, redisPrefix });
const seqs = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const batchesOf = async (runId: string) =>
  (await prisma.runEventBatch.findMany({ where: { runId }, orderBy: { firstSeq: "asc" } })).map((b) => [b.firstSeq, b.lastSeq, (b.events as unknown[]).length]);


describe("run events in PostgreSQL", () => {
  it("stores a run's events as one row per batch: run_started, each flush, the rest with the terminal event", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000 });
    for (let i = 0; i < 5; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    await writer.flush();
    for (let i = 0; i < 3; i++) writer.emit({ type: "text_chunk", content: `b${i}` });
    await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });

    expect(await batchesOf(runId)).toEqual([
      [1, 1, 1],
      [2, 6, 5],
      [7, 10, 4],
    ]);
    const events = await readDbEvents({ prisma }, runId);
    expect(events.map((e) => e.seq)).toEqual(seqs(1, 10));
    expect(events.map((e) => e.type)).toEqual(["run_started", ...seqs(2, 9).map(() => "text_chunk"), "run_completed"]);
    expect((await readDbEvents({ prisma }, runId, 6)).map((e) => e.seq)).toEqual(seqs(7, 10));
  });

  it("stores events and messages holding text PostgreSQL refuses (U+0000, lone surrogates) with U+FFFD, so the run still ends", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000 });
    writer.emit({ type: "text_chunk", content: "a\ud800" });
    await writer.flush();
    writer.emit({ type: "tool_result", tool: "t", action: "a", result: { "k\udfff": "x\u0000" }, call_id: "c1" });
    const terminal = await finishRun(deps(), { runId, status: "completed", output: "ok", messages: [{ role: "user", content: "q\udc00" }], writer });
    expect(terminal).toMatchObject({ type: "run_completed", seq: 4 });
    const events = await readDbEvents({ prisma }, runId);
    expect(events.slice(1, 3)).toEqual([
      { seq: 2, type: "text_chunk", content: "a\uFFFD" },
      { seq: 3, type: "tool_result", tool: "t", action: "a", result: { "k\uFFFD": "x\uFFFD" }, call_id: "c1" },
    ]);
    expect((await prisma.message.findFirstOrThrow({ where: { runId } })).content).toBe("q\uFFFD");
  });

  it("writes a batch again with the events after it when its write reported an error after committing: each event once", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), prisma: relayed, runId, lastSeq: 1, flushIntervalMs: 600_000, onError: () => {} });
    for (let i = 0; i < 4; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    const cuts = relay.cuts();
    relay.cutAfterNextAnswer();
    await expect(writer.flush()).rejects.toThrow();
    expect(relay.cuts()).toBe(cuts + 1);
    expect(await batchesOf(runId)).toEqual([[1, 1, 1], [2, 5, 4]]);
    for (let i = 0; i < 2; i++) writer.emit({ type: "text_chunk", content: `b${i}` });
    await writer.flush();
    // The same first seq: the row now holds the retried events and the new ones.
    expect(await batchesOf(runId)).toEqual([[1, 1, 1], [2, 7, 6]]);
    writer.emit({ type: "text_chunk", content: "c" });
    await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(seqs(1, 9));
  });

  it("merges batches that overlap, each seq once and in order", async () => {
    const runId = await createTestRun(prisma);
    // Written by a writer whose first batch (2–4) failed after committing while the next (5–6)
    // succeeded: the retry holds 2–4 and 7, and a batch with a later first seq holds 5–6.
    const ev = (seq: number) => ({ seq, type: "text_chunk", content: `e${seq}` });
    await prisma.runEventBatch.createMany({
      data: [
        { runId, firstSeq: 2, lastSeq: 7, events: [ev(2), ev(3), ev(4), ev(7)] },
        { runId, firstSeq: 5, lastSeq: 6, events: [ev(5), ev(6)] },
      ],
    });
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(seqs(1, 7));
    expect((await readDbEvents({ prisma }, runId, 4)).map((e) => e.seq)).toEqual([5, 6, 7]);
  });

  it("ends a run after the batch on its way: events of a write that fails meanwhile are stored with the terminal event", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), prisma: relayed, runId, lastSeq: 1, flushIntervalMs: 600_000, onError: () => {} });
    for (let i = 0; i < 3; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    relay.cutBeforeNextStatement();
    const failing = writer.flush().then(
      () => "stored",
      () => "failed",
    );
    const terminal = await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
    expect(await failing).toBe("failed");
    expect(terminal).toMatchObject({ type: "run_completed", seq: 5 });
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(seqs(1, 5));
    expect(await batchesOf(runId)).toEqual([[1, 1, 1], [2, 5, 4]]);
  });

  it("keeps the events of two writes that both failed in seq order: the batch written later is read by a reader after any seq", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), prisma: relayed, runId, lastSeq: 1, flushIntervalMs: 600_000, onError: () => {} });
    const settled = (p: Promise<void>) => p.then(() => "stored", () => "failed");
    relay.setDown(true);
    for (let i = 0; i < 3; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    const first = settled(writer.flush());
    // Taken while the first write is on its way: it waits behind it, and fails in turn.
    for (let i = 0; i < 2; i++) writer.emit({ type: "text_chunk", content: `b${i}` });
    const second = settled(writer.flush());
    expect([await first, await second]).toEqual(["failed", "failed"]);
    relay.setDown(false);
    await writer.flush();

    expect(await batchesOf(runId)).toEqual([[1, 1, 1], [2, 6, 5]]);
    expect((await readDbEvents({ prisma }, runId, 4)).map((e) => e.seq)).toEqual([5, 6]);
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(seqs(1, 6));
  });

  it("writes a batch whose write failed again later, though the run emits nothing more (a long tool call)", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), prisma: relayed, runId, lastSeq: 1, flushIntervalMs: 200, onError: () => {} });
    relay.setDown(true);
    writer.emit({ type: "tool_call", tool: "http", action: "get", params: { url: "https://example.com" }, call_id: "c1" });
    await expect(writer.flush()).rejects.toThrow();
    relay.setDown(false);
    await eventually(async () => (await readDbEvents({ prisma }, runId)).length === 2, { timeoutMs: 5000, intervalMs: 50 });
    expect((await readDbEvents({ prisma }, runId)).map((e) => [e.seq, e.type])).toEqual([[1, "run_started"], [2, "tool_call"]]);
    await writer.drain();
  });

  it("a batch stored out of order before that was fixed is repaired by its migration, and read again", async () => {
    const runId = await createTestRun(prisma);
    const event = (seq: number) => ({ seq, type: "text_chunk", run_id: runId, content: `c${seq}` });
    await prisma.runEventBatch.create({ data: { runId, firstSeq: 5, lastSeq: 4, events: [5, 6, 2, 3, 4].map(event) } });
    expect(await readDbEvents({ prisma }, runId, 4)).toEqual([]);
    const repair = "../../../prisma/migrations/20261130060000_event_batch_bounds_repair/migration.sql";
    await prisma.$executeRawUnsafe(await readFile(path.join(__dirname, repair), "utf8"));
    expect(await batchesOf(runId)).toEqual([[1, 1, 1], [5, 6, 5]]);
    expect((await readDbEvents({ prisma }, runId, 4)).map((e) => e.seq)).toEqual([5, 6]);
  });

  it("ends a run whose counts PostgreSQL's integer could not hold, with the counts brought into its range", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000 });
    const usage = { promptTokens: 3e9, completionTokens: -5, toolCalls: 1.5, chargedToolCalls: 0, modelCalls: 1 };
    const terminal = await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer, usage });
    expect(terminal).toMatchObject({ type: "run_completed", seq: 2 });
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", promptTokens: 2_147_483_647, completionTokens: 0, toolCallCount: 2 });
  });

  it("a run ended by someone else than its worker keeps the events only its Redis log holds", async () => {
    const runId = await createTestRun(prisma);
    // A worker that emitted three events and died (or gave up) before storing them.
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000 });
    for (let i = 0; i < 3; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    await writer.drain();
    await eventually(async () => (await logSeqs(runId)).at(-1) === 4, { intervalMs: 10 });

    expect(await failRun(deps(), { id: runId, query: "q" }, { code: "worker_lost", message: "gone" })).toBe(true);
    const events = await readDbEvents({ prisma }, runId);
    expect(events.map((e) => [e.seq, e.type])).toEqual([[1, "run_started"], [2, "text_chunk"], [3, "text_chunk"], [4, "text_chunk"], [5, "run_failed"]]);
  });

  it("an end that could not be stored leaves its events and its seq to the next attempt", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000 });
    for (let i = 0; i < 2; i++) writer.emit({ type: "text_chunk", content: `a${i}` });
    relay.cutBeforeNextStatement();
    await expect(finishRun({ ...deps(), prisma: relayed }, { runId, status: "completed", output: "x", messages: [], writer })).rejects.toThrow();
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running" });
    const terminal = await finishRun(deps(), { runId, status: "failed", messages: [], writer, error: { code: "internal_error", message: "x" } });
    expect(terminal).toMatchObject({ type: "run_failed", seq: 4 });
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(seqs(1, 4));
  });
});

const logSeqs = async (runId: string) =>
  (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).flatMap((json) => [JSON.parse(json)].flat().map((e: { seq: number }) => e.seq));

