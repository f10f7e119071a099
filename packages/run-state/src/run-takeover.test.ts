import pg from "pg";
import IORedis from "ioredis";
import { type PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { readDbEvents, RUN_LOG_TTL_LIVE_S, runCancelKey, RunEventWriter, runLogKey, runWriterKey, takeOverRunWriter } from "@agentrun/events";
import { createTestRun, startPgRelay, startPrivateRedis, testEnv, testPrisma, testStores } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { endAbandonedRun, finishRun, failRun, type FinishRunDeps } from "./finish-run";

// Ending a run in its worker's stead (finishRun without the worker's writer), against the real
// PostgreSQL and Redis: what is taken over, when, and what happens when part of it fails.
let prisma: PrismaClient;
let redis: Redis;
const redisPrefix = `${testEnv().redisPrefix}:takeover`;
testStores({}, (s) => ({ prisma, redis } = s));

const deps = () => ({ prisma, redis, redisPrefix });
const lost = { code: "worker_lost", message: "gone" };
const logEvents = async (runId: string) => (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).flatMap((json) => [JSON.parse(json)].flat() as RunEvent[]);

/** A running run held by worker `w1`, with its writer. */
async function runOfW1(): Promise<{ runId: string; writer: RunEventWriter; superseded: () => boolean }> {
  const runId = await createTestRun(prisma, "running");
  await prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  let called = false;
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000, onSuperseded: () => (called = true) });
  return { runId, writer, superseded: () => called };
}

it("stops a worker at its next flush once the run is taken over in PostgreSQL, before any append is refused", async () => {
  const { runId, writer, superseded } = await runOfW1();
  writer.emit({ type: "text_chunk", content: "a" });
  await writer.flush();
  await prisma.run.update({ where: { id: runId }, data: { workerId: "end_someone" } });
  writer.emit({ type: "text_chunk", content: "b" });
  await writer.flush();
  expect(superseded()).toBe(true);
  expect(writer.superseded).toBe(true);
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual([1, 2]);
});

it("gives the run back when its log cannot be taken over (Redis down), so its worker is not half shut out", async () => {
  const { runId } = await runOfW1();
  const down = createRedis({ url: "redis://127.0.0.1:1", role: "commands" });
  try {
    await expect(failRun({ prisma, redis: down, redisPrefix }, { id: runId, query: "q" }, lost)).rejects.toThrow();
  } finally {
    down.disconnect();
  }
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", workerId: "w1" });
}, 30_000);

/** A run of w1 whose writer key is set, and a client of a private Redis that answers within 300 ms or not at all. */
async function runOnSlowRedis() {
  const { runId } = await runOfW1();
  const server = await startPrivateRedis();
  const slow = new IORedis(server.url, { commandTimeout: 300, maxRetriesPerRequest: 1 });
  const key = runWriterKey(redisPrefix, runId);
  await slow.set(key, "w1", "EX", RUN_LOG_TTL_LIVE_S);
  const stop = async () => {
    server.thaw();
    slow.disconnect();
    await server.stop();
  };
  return { runId, server, slow, key, stop };
}

it("carries out a take-over whose answer was lost once Redis answers again within its retries, and ends the run", async () => {
  const { runId, server, slow, key, stop } = await runOnSlowRedis();
  try {
    // Redis stops answering for a moment: the take-over times out, is tried again, and the retry
    // finds the key already its own (the first one was carried out once Redis answered).
    server.freeze();
    const ended = failRun({ prisma, redis: slow as unknown as Redis, redisPrefix }, { id: runId, query: "q" }, lost);
    await new Promise((r) => setTimeout(r, 800));
    server.thaw();
    expect(await ended).toBe(true);
    expect(await slow.get(key)).not.toBe("w1");
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "failed", errorCode: "worker_lost" });
  } finally {
    await stop();
  }
}, 30_000);

it("gives the log back when Redis stays silent past the take-over's retries, though it carried the take-over out, so its worker is not shut out", async () => {
  const { runId, server, slow, key, stop } = await runOnSlowRedis();
  try {
    // The take-over and its retries time out, but wait in the connection to be carried out once
    // Redis answers again, as does the give-back sent after them.
    server.freeze();
    const ended = failRun({ prisma, redis: slow as unknown as Redis, redisPrefix }, { id: runId, query: "q" }, lost);
    const failed = expect(ended).rejects.toThrow(/timed out/);
    // Past the take-over's 10 s of retries.
    await new Promise((r) => setTimeout(r, 11_000));
    server.thaw();
    await failed;
    expect(await slow.get(key)).toBe("w1");
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", workerId: "w1" });
  } finally {
    await stop();
  }
}, 40_000);

it("leaves a queued run's log alone: a worker claiming it after a failed end is not refused", async () => {
  const runId = await createTestRun(prisma, "queued");
  // The end is lost with its connection after the take-over (a value PostgreSQL cannot store is
  // not the point here: a lost connection is). The run stays queued.
  const relay = await startPgRelay(testEnv().databaseUrl);
  const relayed = testPrisma(relay.url);
  try {
    relay.cutBeforeNextStatement("agentrun_finish_run");
    await expect(failRun({ prisma: relayed, redis, redisPrefix }, { id: runId, query: "q" }, lost)).rejects.toThrow();
    expect(relay.cuts()).toBe(1);
  } finally {
    await relayed.$disconnect();
    await relay.close();
  }
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "queued" });
  expect(await redis.get(runWriterKey(redisPrefix, runId))).toBeNull();
  // A worker claims it: its appends go through.
  await prisma.run.update({ where: { id: runId }, data: { status: "running", workerId: "w2" } });
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w2", flushIntervalMs: 600_000 });
  writer.emit({ type: "text_chunk", content: "claimed" });
  expect(await finishRun(deps(), { runId, status: "completed", output: "claimed", messages: [], writer })).toMatchObject({ type: "run_completed", seq: 3 });
  expect(writer.superseded).toBe(false);
});

it("publishes the stored terminal event of a run its worker ended while another taker held the log", async () => {
  const { runId, writer } = await runOfW1();
  writer.emit({ type: "text_chunk", content: "a" });
  // Another taker set the log's writer; then the worker's end was stored (its publish refused).
  await takeOverRunWriter(redis, runWriterKey(redisPrefix, runId), "end_other", RUN_LOG_TTL_LIVE_S);
  const terminal = await finishRun(deps(), { runId, status: "completed", output: "a", messages: [], writer });
  expect(terminal).toMatchObject({ type: "run_completed", seq: 3 });
  expect((await logEvents(runId)).map((e) => e.type)).not.toContain("run_completed");
  // A sweeper or a forced cancel arriving now finds the run ended, and publishes its end.
  expect(await failRun(deps(), { id: runId, query: "q" }, lost)).toBe(false);
  expect((await logEvents(runId)).filter((e) => e.type === "run_completed")).toEqual([terminal]);
});

it("refuses the worker's end when a take-over commits while that end waits for the run's row", async () => {
  const { runId, writer } = await runOfW1();
  writer.emit({ type: "text_chunk", content: "a" });
  const taker = new pg.Client({ connectionString: testEnv().databaseUrl });
  await taker.connect();
  try {
    await taker.query("BEGIN");
    await taker.query("UPDATE runs SET worker_id = 'end_taker' WHERE id = $1", [runId]);
    const ending = finishRun(deps(), { runId, status: "completed", output: "a", messages: [], writer });
    await new Promise((r) => setTimeout(r, 300));
    await taker.query("COMMIT");
    expect(await ending).toBeNull();
  } finally {
    await taker.end();
  }
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", workerId: "end_taker" });
});

it("keeps what a cancelled run had said and done when its worker is gone: its stored and logged events' text and tool calls", async () => {
  const { runId, writer } = await runOfW1();
  // A first model call that said something and called a tool: its text is a message of its own, not the output.
  writer.emit({ type: "text_chunk", content: "Let me look. " });
  writer.emit({ type: "tool_call", tool: "clock", action: "now", params: {}, call_id: "c1" });
  writer.emit({ type: "tool_result", tool: "clock", action: "now", result: { iso: "2026-01-01T00:00:00.000Z" }, call_id: "c1" });
  writer.emit({ type: "text_chunk", content: "Hel" });
  await writer.flush();
  // Only in the run's Redis log: its worker stopped before storing it.
  writer.emit({ type: "text_chunk", content: "lo, wor" });
  await writer.drain();
  await redis.set(runCancelKey(redisPrefix, runId), "1", "EX", 60);
  expect(await endAbandonedRun(deps(), { id: runId, query: "q" }, lost)).toBe(true);
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "cancelled", output: "Hello, wor", creditsUsed: 0, toolCallCount: 1 });
  const messages = await prisma.message.findMany({ where: { runId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  expect(messages.map((m) => [m.role, m.content])).toEqual([
    ["user", "q"],
    ["assistant", "Let me look. "],
    ["tool", '{"iso":"2026-01-01T00:00:00.000Z"}'],
    ["assistant", "Hello, wor"],
  ]);
  expect(messages[2]).toMatchObject({ tool: "clock", action: "now", params: {}, result: { iso: "2026-01-01T00:00:00.000Z" }, toolCallId: "c1" });
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.type)).toEqual(["run_started", "text_chunk", "tool_call", "tool_result", "text_chunk", "text_chunk", "run_cancelled"]);
});

it("ends cancelled a run whose cancel is recorded on its row though its Redis flag is gone (Redis lost it, or the cancel's flag was never set)", async () => {
  const { runId, writer } = await runOfW1();
  writer.emit({ type: "text_chunk", content: "Hel" });
  await writer.drain();
  await prisma.run.update({ where: { id: runId }, data: { cancelRequestedAt: new Date() } });
  await redis.del(runCancelKey(redisPrefix, runId));
  expect(await endAbandonedRun(deps(), { id: runId, query: "q" }, lost)).toBe(true);
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "cancelled", output: "Hel", errorCode: null, creditsUsed: 0 });
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.type)).toEqual(["run_started", "text_chunk", "run_cancelled"]);
});

describe("an end whose answer was lost after it committed", () => {
  /** Ends a run of w1 that said "a" as completed, through a relay that loses the end's answer, after `before` (given the run id). */
  async function endLosingItsAnswer(before: (runId: string) => Promise<unknown> = async () => {}) {
    const relay = await startPgRelay(testEnv().databaseUrl);
    const relayed = testPrisma(relay.url);
    try {
      const { runId, writer } = await runOfW1();
      writer.emit({ type: "text_chunk", content: "a" });
      await before(runId);
      // Opens the relayed pool's connection, so that the next statement sent is the end.
      await relayed.$queryRaw`SELECT 1`;
      relay.cutAfterNextAnswer();
      const terminal = await finishRun({ prisma: relayed, redis, redisPrefix }, { runId, status: "completed", output: "a", messages: [], writer, retryForMs: 5_000 });
      expect(relay.cuts()).toBe(1);
      return { runId, terminal };
    } finally {
      await relayed.$disconnect();
      await relay.close();
    }
  }

  it("is the worker's end all the same: returned and published, not taken for someone else's", async () => {
    const { runId, terminal } = await endLosingItsAnswer();
    expect(terminal).toMatchObject({ type: "run_completed", seq: 3, run_id: runId });
    expect((await logEvents(runId)).filter((e) => e.type === "run_completed")).toEqual([terminal]);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", output: "a", lastSeq: 3 });
  }, 30_000);

  it("is the worker's end all the same when the run's recorded cancel stored it as run_cancelled", async () => {
    // A cancel answered while the run's last model call was finishing: the end is stored cancelled.
    const { runId, terminal } = await endLosingItsAnswer((id) => prisma.run.update({ where: { id }, data: { cancelRequestedAt: new Date() } }));
    expect(terminal).toMatchObject({ type: "run_cancelled", seq: 3, run_id: runId });
    expect((await logEvents(runId)).filter((e) => e.seq === 3)).toEqual([terminal]);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "cancelled", output: "a", lastSeq: 3 });
  }, 30_000);

  /**
   * Runs `finish` (an end of `runId` through a relay that loses the end's statement on its way)
   * while another party holds the run, in a transaction begun with `claim` (`$1` the run id), and
   * then stores its own failed end `theirs` under `holder` and commits: what `finish` returns.
   */
  async function loseEndWhileAnotherEnds(runId: string, claim: string, holder: string, theirs: RunEvent, finish: (deps: FinishRunDeps) => Promise<RunEvent | null>) {
    const relay = await startPgRelay(testEnv().databaseUrl);
    const relayed = testPrisma(relay.url);
    const other = new pg.Client({ connectionString: testEnv().databaseUrl });
    await other.connect();
    try {
      await relayed.$queryRaw`SELECT 1`;
      await other.query("BEGIN");
      await other.query(claim, [runId]);
      relay.cutBeforeNextStatement("agentrun_finish_run");
      const ending = finish({ prisma: relayed, redis, redisPrefix });
      while (relay.cuts() === 0) await new Promise((r) => setTimeout(r, 5));
      const { code, message } = (theirs as { error: { code: string; message: string } }).error;
      await other.query(`SELECT agentrun_finish_run($1, 'failed', '', 0, 0, 0, 0, $2, $3, $4::jsonb, '[]', '[]', $5, false, $6)`, [runId, code, message, JSON.stringify(theirs), `led_${runId}`, holder]);
      await other.query("COMMIT");
      return await ending;
    } finally {
      await other.end();
      await relayed.$disconnect();
      await relay.close();
    }
  }

  it("does not take a worker's end of the same type and seq for its own when it ends a queued run without a writer id", async () => {
    // The gateway fails the queued run it could not queue (no writer id, only while queued); its
    // end is lost on the way, and meanwhile a worker claims the run and fails it at seq 2.
    const runId = await createTestRun(prisma, "queued");
    const workersEnd = { seq: 2, type: "run_failed", run_id: runId, error: { code: "model_error", message: "The model failed." } } as RunEvent;
    const unqueued = { code: "unavailable", message: "The run queue is unavailable." };
    const ended = await loseEndWhileAnotherEnds(runId, "UPDATE runs SET status = 'running', worker_id = 'w2' WHERE id = $1", "w2", workersEnd, (d) => {
      const writer = new RunEventWriter({ ...d, runId, lastSeq: 1, onError: () => {} });
      return finishRun(d, { runId, status: "failed", error: unqueued, messages: [], writer, retryForMs: 5_000, onlyIfQueued: true });
    });
    expect(ended).toBeNull();
    expect((await logEvents(runId)).filter((e) => e.seq === 2)).toEqual([workersEnd]);
  }, 30_000);

  it("publishes the end a taker stored meanwhile, and returns null for it", async () => {
    // A sweeper holds the run (uncommitted) while the worker's end is lost on its way; the
    // worker's retry waits for the row and then finds the sweeper's end, never published.
    const { runId, writer } = await runOfW1();
    writer.emit({ type: "text_chunk", content: "a" });
    const sweepersEnd = { seq: 3, type: "run_failed", run_id: runId, error: lost } as RunEvent;
    const ended = await loseEndWhileAnotherEnds(runId, "UPDATE runs SET worker_id = 'end_sweeper' WHERE id = $1", "end_sweeper", sweepersEnd, (d) =>
      finishRun(d, { runId, status: "completed", output: "a", messages: [], writer, retryForMs: 5_000 }),
    );
    expect(ended).toBeNull();
    expect((await logEvents(runId)).filter((e) => e.seq === 3)).toEqual([sweepersEnd]);
  }, 30_000);
});
