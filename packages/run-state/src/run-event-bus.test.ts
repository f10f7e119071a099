import type { PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { followRun, readStoredEvents, RunEventWriter, runChannel, runLogKey, SubscriberHub } from "@agentrun/events";
import { createTestRun, eventually, testEnv, testStores, within } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { finishRun } from "./finish-run";

let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:bus`;

testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});

const deps = () => ({ prisma, redis, redisPrefix });

/** Ends a run (completed) through a Redis connection that cannot publish: the end is stored only. */
async function endUnpublished(runId: string, lastSeq: number): Promise<void> {
  const broken = createRedis({ url: "redis://127.0.0.1:1", role: "commands" });
  try {
    const cutOff = new RunEventWriter({ prisma, redis: broken, redisPrefix, runId, lastSeq, onError: () => {} });
    await finishRun({ prisma, redis: broken, redisPrefix }, { runId, status: "completed", output: "a", messages: [], writer: cutOff });
  } finally {
    broken.disconnect();
  }
}

describe("run event bus", () => {
  it("delivers every event exactly once, in order, to readers attaching before, during and after the run", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 5 });
    const early: RunEvent[] = [];
    const earlyDone = followRun({ ...deps(), hub, runId, onEvent: (e) => early.push(e) });
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 30; i++) writer.emit({ type: "text_chunk", content: `c${i}` });
    const mid: RunEvent[] = [];
    const midDone = followRun({ ...deps(), hub, runId, afterSeq: 10, onEvent: (e) => mid.push(e) });
    for (let i = 30; i < 60; i++) {
      writer.emit({ type: "text_chunk", content: `c${i}` });
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 10));
    }
    const terminal = await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
    expect(terminal).toMatchObject({ type: "run_completed", seq: 62 });
    await Promise.all([earlyDone, midDone]);
    const late: RunEvent[] = [];
    await followRun({ ...deps(), hub, runId, afterSeq: 55, onEvent: (e) => late.push(e) });

    expect(early.map((e) => e.seq)).toEqual(Array.from({ length: 62 }, (_, i) => i + 1));
    expect(mid.map((e) => e.seq)).toEqual(Array.from({ length: 52 }, (_, i) => i + 11));
    expect(late.map((e) => e.seq)).toEqual([56, 57, 58, 59, 60, 61, 62]);
    expect(early.at(-1)!.type).toBe("run_completed");
    expect(hub.channelCount).toBe(0);
  });

  it("goes past seqs lost for good once the run has ended, instead of waiting for them", async () => {
    const runId = await createTestRun(prisma);
    // Seq 3 never reached either store: its append failed and its worker died before a flush.
    const log = runLogKey(redisPrefix, runId);
    await redis.rpush(log, JSON.stringify({ seq: 2, type: "text_chunk", content: "a" }), JSON.stringify({ seq: 4, type: "text_chunk", content: "c" }));
    const terminal = await finishRun(deps(), { runId, status: "failed", error: { code: "worker_lost", message: "gone" }, messages: [] });
    expect(terminal).toMatchObject({ seq: 5, type: "run_failed" });
    const seen: RunEvent[] = [];
    const stop = new AbortController();
    const end = await within(followRun({ ...deps(), hub, runId, afterSeq: 1, onEvent: (e) => seen.push(e), signal: stop.signal }), 5000);
    stop.abort();
    expect(end).toMatchObject({ seq: 5, type: "run_failed" });
    expect(seen.map((e) => e.seq)).toEqual([2, 4, 5]);
  });

  it("reads PostgreSQL again for a gap when the run's end arrives while it reads, instead of going past stored events", async () => {
    const runId = await createTestRun(prisma);
    // The follower's reads of stored batches: this one may be held after PostgreSQL answered
    // (an old snapshot handed back late), as a slow query is.
    let hold: Promise<void> | null = null;
    let answered!: () => void;
    const heldAnswer = new Promise<void>((r) => (answered = r));
    const reader = prisma.$extends({
      query: {
        runEventBatch: {
          async findMany({ args, query }) {
            const rows = await query(args);
            if (hold) (answered(), await hold);
            return rows;
          },
        },
      },
    }) as unknown as PrismaClient;
    const seen: RunEvent[] = [];
    const done = followRun({ prisma: reader, redis, redisPrefix, hub, runId, afterSeq: 1, onEvent: (e) => seen.push(e), pollIntervalMs: 60_000 });
    await new Promise((r) => setTimeout(r, 50));

    // Seqs 2-4 reach neither the log nor the channel (Redis refused them) and wait in the
    // worker's batch; seq 4 then reaches both, once Redis is back.
    const broken = createRedis({ url: "redis://127.0.0.1:1", role: "commands" });
    try {
      const writer = new RunEventWriter({ prisma, redis: broken, redisPrefix, runId, lastSeq: 1, flushIntervalMs: 60_000, onError: () => {} });
      for (const content of ["a", "b", "c"]) writer.emit({ type: "text_chunk", content });
      let release!: () => void;
      hold = new Promise<void>((r) => (release = r));
      const four = JSON.stringify({ seq: 4, type: "text_chunk", content: "c" });
      await redis.rpush(runLogKey(redisPrefix, runId), four);
      await redis.publish(runChannel(redisPrefix, runId), four);
      // The gap's read of PostgreSQL has its answer (no batch yet) and is held: now the worker
      // stores its end, with seqs 2-4, and publishes the terminal event.
      await within(heldAnswer, 5000);
      const terminal = await finishRun({ prisma, redis: broken, redisPrefix }, { runId, status: "completed", output: "abc", messages: [], writer });
      expect(terminal).toMatchObject({ seq: 5, type: "run_completed" });
      await redis.publish(runChannel(redisPrefix, runId), JSON.stringify(terminal));
      await new Promise((r) => setTimeout(r, 50));
      release();
    } finally {
      broken.disconnect();
    }
    expect(await within(done, 5000)).toMatchObject({ seq: 5, type: "run_completed" });
    expect(seen.map((e) => [e.seq, e.type === "text_chunk" ? e.content : e.type])).toEqual([
      [2, "a"],
      [3, "b"],
      [4, "c"],
      [5, "run_completed"],
    ]);
  });

  it("replays from PostgreSQL alone once the Redis log is gone", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
    for (let i = 0; i < 5; i++) writer.emit({ type: "text_chunk", content: `c${i}` });
    await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
    await redis.del(runLogKey(redisPrefix, runId));
    const events = await readStoredEvents(deps(), runId, 0);
    expect(events.map((e) => e.type)).toEqual(["run_started", "text_chunk", "text_chunk", "text_chunk", "text_chunk", "text_chunk", "run_completed"]);
  });

  it("heals a terminal event whose publish was lost: the periodic check finds it in PostgreSQL", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
    const got: RunEvent[] = [];
    const done = followRun({ ...deps(), hub, runId, onEvent: (e) => got.push(e), pollIntervalMs: 100, maxPollIntervalMs: 400 });
    await new Promise((r) => setTimeout(r, 50));
    writer.emit({ type: "text_chunk", content: "a" });
    await new Promise((r) => setTimeout(r, 50));
    // The run ends while this process's Redis connection cannot publish: the terminal event is
    // only in PostgreSQL, and the log ends at what the reader already has.
    await endUnpublished(runId, writer.lastSeq);
    const terminal = await within(done, 5000);
    expect(terminal).toMatchObject({ type: "run_completed" });
    expect(got.map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("checks soon again once a quiet run is active again: an end whose publish is lost is found within the first interval", async () => {
    const runId = await createTestRun(prisma);
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
    const got: RunEvent[] = [];
    const done = followRun({ ...deps(), hub, runId, onEvent: (e) => got.push(e), pollIntervalMs: 100, maxPollIntervalMs: 60_000 });
    // Quiet for 3.2 s: the checks are 100, 200, 400, 800 and 1,600 ms apart, the next 3,200.
    await new Promise((r) => setTimeout(r, 3200));
    writer.emit({ type: "text_chunk", content: "a" });
    await eventually(async () => got.length === 2);
    expect(got.map((e) => e.seq)).toEqual([1, 2]);
    await endUnpublished(runId, writer.lastSeq);
    // Found by a check at the first interval after the event, not the one 3.2 s on.
    expect(await within(done, 1500)).toMatchObject({ type: "run_completed", seq: 3 });
  });

  it("reads what it missed as soon as the subscriber connection is back after a disconnect", async () => {
    const runId = await createTestRun(prisma);
    const ownSub = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
    const ownHub = new SubscriberHub(ownSub);
    try {
      const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
      const got: RunEvent[] = [];
      // The periodic check is far off: only the reconnection can bring the events in time.
      const done = followRun({ ...deps(), hub: ownHub, runId, onEvent: (e) => got.push(e), pollIntervalMs: 60_000 });
      await new Promise((r) => setTimeout(r, 100));
      ownSub.disconnect(true); // drops the connection; ioredis reconnects and re-subscribes
      for (let i = 0; i < 3; i++) writer.emit({ type: "text_chunk", content: `c${i}` });
      await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
      const terminal = await within(done, 5000);
      expect(terminal).toMatchObject({ type: "run_completed" });
      expect(got.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    } finally {
      ownSub.disconnect();
    }
  });

  it("finishes a run only once", async () => {
    const runId = await createTestRun(prisma);
    const first = await finishRun(deps(), { runId, status: "cancelled", messages: [{ role: "user", content: "q" }] });
    const second = await finishRun(deps(), { runId, status: "failed", messages: [] });
    expect(first).toMatchObject({ type: "run_cancelled", seq: 2 });
    expect(second).toBeNull();
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
    expect(run.status).toBe("cancelled");
    expect(run.task.status).toBe("completed");
    expect(run.task.activeRunId).toBeNull();
    expect(await prisma.message.count({ where: { runId } })).toBe(1);
  });
});
