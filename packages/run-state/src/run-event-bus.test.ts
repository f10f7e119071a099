import { newId, type PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { followRun, readStoredEvents, RUN_LOG_TTL_AFTER_END_S, RunEventWriter, runChannel, runLogKey, SubscriberHub } from "@agentrun/events";
import { createTestRun, eventually, testEnv, testPrisma, within } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { finishRun } from "./finish-run";

let prisma: PrismaClient;
let redis: Redis;
let sub: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:bus`;

beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
  sub = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
  hub = new SubscriberHub(sub);
});
afterAll(async () => {
  redis.disconnect();
  sub.disconnect();
  await prisma.$disconnect();
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

describe("event writes batched across runs", () => {
  // Writers start a timer for their PostgreSQL batch; these tests never let it fire.
  const created: RunEventWriter[] = [];
  afterEach(async () => {
    jest.restoreAllMocks();
    for (const w of created.splice(0)) await w.drain();
  });

  const nextTurn = () => new Promise((r) => setImmediate(r));

  /** Writers on the shared connection (events stay out of PostgreSQL: no flush is due in these tests). */
  function writers(n: number, opts: { onError?: (runId: string, err: unknown) => void; deleteAtEnd?: string[] } = {}) {
    return Array.from({ length: n }, () => {
      const runId = newId("run");
      const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000, deleteAtEnd: opts.deleteAtEnd, onError: (err) => opts.onError?.(runId, err) });
      created.push(writer);
      return { runId, writer };
    });
  }

  /** Collects what each run's channel carries, parsed (a message holds one event or an array). */
  async function listen(runIds: string[]) {
    const got = new Map<string, RunEvent[]>(runIds.map((id) => [id, []]));
    const unsubs = await Promise.all(
      runIds.map((id) =>
        hub.subscribe(runChannel(redisPrefix, id), (msg) => {
          const parsed = JSON.parse(msg);
          got.get(id)!.push(...(Array.isArray(parsed) ? parsed : [parsed]));
        }),
      ),
    );
    return { got, close: () => unsubs.forEach((u) => u()) };
  }

  /** Resolves once `check` holds (polled every 10 ms, for up to 5 s). */
  const until = (check: () => boolean) => eventually(async () => check(), { timeoutMs: 5000, intervalMs: 10 });

  it("sends the events of many runs emitted in one turn in shared batches, each run's complete and in order", async () => {
    const ws = writers(20);
    const { got, close } = await listen(ws.map((w) => w.runId));
    const pipelines = jest.spyOn(redis, "pipeline");
    const multis = jest.spyOn(redis, "multi");
    const rounds = 10;
    for (let i = 0; i < rounds; i++) {
      for (const w of ws) w.writer.emit({ type: "text_chunk", content: `c${i}` });
      await nextTurn();
    }
    await until(() => [...got.values()].every((events) => events.length === rounds));
    close();
    // 200 emits by 20 runs in 10 turns: a few batches per turn at most, not one write per event or per run.
    expect(pipelines.mock.calls.length + multis.mock.calls.length).toBeLessThanOrEqual(2 * rounds);
    for (const { runId } of ws) {
      const expected = Array.from({ length: rounds }, (_, i) => ({ seq: i + 2, type: "text_chunk", content: `c${i}` }));
      expect(got.get(runId)).toEqual(expected);
      const log = (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).map((e) => JSON.parse(e));
      expect(log).toEqual(expected);
    }
  });

  it("reports a failed write to its own run only; the other runs of the batch are written", async () => {
    const errors: [string, string][] = [];
    const [{ runId: brokenId, writer: broken }, { runId: fineId, writer: fine }] = writers(2, { onError: (runId, err) => errors.push([runId, (err as Error).message]) }) as [
      { runId: string; writer: RunEventWriter },
      { runId: string; writer: RunEventWriter },
    ];
    await redis.set(runLogKey(redisPrefix, brokenId), "not a list"); // RPUSH onto it fails
    const { got, close } = await listen([fineId]);
    broken.emit({ type: "text_chunk", content: "lost" });
    fine.emit({ type: "text_chunk", content: "kept" });
    broken.emit({ type: "text_chunk", content: "lost too" });
    fine.emit({ type: "text_chunk", content: "kept too" });
    await until(() => got.get(fineId)!.length === 2 && errors.length > 0);
    close();
    expect(errors.every(([id, message]) => id === brokenId && /WRONGTYPE/.test(message))).toBe(true);
    expect(got.get(fineId)!.map((e) => (e as { content: string }).content)).toEqual(["kept", "kept too"]);
  });

  it("resolves publishStored once the terminal event is in the log, with the end-of-run expiry and deletions", async () => {
    const hb = `${redisPrefix}:hb:${newId("run")}`;
    await redis.set(hb, "w1");
    const [{ runId, writer }] = writers(1, { deleteAtEnd: [hb] }) as [{ runId: string; writer: RunEventWriter }];
    writer.emit({ type: "text_chunk", content: "a" });
    await writer.publishStored(writer.takeTerminal({ type: "run_completed", run_id: runId, output: "a" } as never));
    const log = (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).map((e) => JSON.parse(e).type);
    expect(log).toEqual(["text_chunk", "run_completed"]);
    const ttl = await redis.ttl(runLogKey(redisPrefix, runId));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(RUN_LOG_TTL_AFTER_END_S);
    expect(await redis.exists(hb)).toBe(0);
    expect(writer.ended).toBe(true);
  });
});
