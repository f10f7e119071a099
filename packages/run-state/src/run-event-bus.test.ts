import { newId, type PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { followRun, readStoredEvents, RunEventWriter, runLogKey, SubscriberHub } from "@agentrun/events";
import { createTenant, testEnv, testPrisma } from "@agentrun/testing";
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

async function newRun(): Promise<string> {
  const t = await createTenant(prisma);
  const taskId = newId("task");
  const runId = newId("run");
  await prisma.task.create({ data: { id: taskId, orgId: t.orgId, agentId: t.agentId, title: "t", activeRunId: runId, runCount: 1 } });
  await prisma.run.create({
    data: { id: runId, taskId, orgId: t.orgId, agentId: t.agentId, query: "q", status: "running", lastSeq: 1, creditsReserved: 0, events: { create: { seq: 1, type: "run_started", data: { seq: 1, type: "run_started", run_id: runId, task_id: taskId } } } },
  });
  return runId;
}

const deps = () => ({ prisma, redis, redisPrefix });

describe("run event bus", () => {
  it("delivers every event exactly once, in order, to readers attaching before, during and after the run", async () => {
    const runId = await newRun();
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

  it("replays from PostgreSQL alone once the Redis log is gone", async () => {
    const runId = await newRun();
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
    for (let i = 0; i < 5; i++) writer.emit({ type: "text_chunk", content: `c${i}` });
    await finishRun(deps(), { runId, status: "completed", output: "x", messages: [], writer });
    await redis.del(runLogKey(redisPrefix, runId));
    const events = await readStoredEvents(deps(), runId, 0);
    expect(events.map((e) => e.type)).toEqual(["run_started", "text_chunk", "text_chunk", "text_chunk", "text_chunk", "text_chunk", "run_completed"]);
  });

  it("heals a terminal event whose publish was lost: the periodic check finds it in PostgreSQL", async () => {
    const runId = await newRun();
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1 });
    const got: RunEvent[] = [];
    const done = followRun({ ...deps(), hub, runId, onEvent: (e) => got.push(e), pollIntervalMs: 100, maxPollIntervalMs: 400 });
    await new Promise((r) => setTimeout(r, 50));
    writer.emit({ type: "text_chunk", content: "a" });
    await new Promise((r) => setTimeout(r, 50));
    // The run ends while this process's Redis connection cannot publish: the terminal event is
    // only in PostgreSQL, and the log ends at what the reader already has.
    const broken = createRedis({ url: "redis://127.0.0.1:1", role: "commands" });
    try {
      const cutOff = new RunEventWriter({ prisma, redis: broken, redisPrefix, runId, lastSeq: writer.lastSeq, onError: () => {} });
      await finishRun({ prisma, redis: broken, redisPrefix }, { runId, status: "completed", output: "a", messages: [], writer: cutOff });
    } finally {
      broken.disconnect();
    }
    const terminal = await Promise.race([done, new Promise((r) => setTimeout(() => r("timed out"), 5000))]);
    expect(terminal).toMatchObject({ type: "run_completed" });
    expect(got.map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("reads what it missed as soon as the subscriber connection is back after a disconnect", async () => {
    const runId = await newRun();
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
      const terminal = await Promise.race([done, new Promise((r) => setTimeout(() => r("timed out"), 5000))]);
      expect(terminal).toMatchObject({ type: "run_completed" });
      expect(got.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    } finally {
      ownSub.disconnect();
    }
  });

  it("finishes a run only once", async () => {
    const runId = await newRun();
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
