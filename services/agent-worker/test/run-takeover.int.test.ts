import Redis from "ioredis";
import { createTenant, eventually, loseClaim, readSse, startStack, testEnv, testPrisma, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import { isTerminalEvent, type RunEvent } from "@agentrun/contracts";
import type { PrismaClient } from "@agentrun/db";
import { controlChannel, readDbEvents, RUN_LOG_TTL_LIVE_S, runCancelKey, runHeartbeatKey, runLogKey, runWriterKey, takeOverRunWriter } from "@agentrun/events";
import { failRun } from "@agentrun/run-state";

// Short stall timings: a paused worker's job is handed to the other worker within seconds.
const workerEnv = { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000", RUN_STALE_AFTER_MS: "60000", MODEL_IDLE_TIMEOUT_MS: "20000" };

let stack: Stack;
let prisma: PrismaClient;
let redis: Redis;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack({ workers: 2, memory: false, workerEnv });
  prisma = testPrisma(testEnv().databaseUrl);
  redis = new Redis(stack.env.REDIS_URL!);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  redis?.disconnect();
  await prisma?.$disconnect();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every event of a run's Redis log, in the order appended. */
async function logEvents(runId: string): Promise<RunEvent[]> {
  const entries = await redis.lrange(runLogKey(stack.env.REDIS_PREFIX!, runId), 0, -1);
  return entries.flatMap((json) => [JSON.parse(json)].flat() as RunEvent[]);
}

/** A run's stores end with its one terminal event: nothing after it, in PostgreSQL or in its log, and seqs without gaps. */
async function expectEndedOnce(runId: string, terminal: RunEvent) {
  const db = await readDbEvents({ prisma }, runId);
  expect(db.map((e) => e.seq)).toEqual(db.map((_, i) => i + 1));
  expect(db.filter(isTerminalEvent)).toEqual([terminal]);
  expect(db.at(-1)).toEqual(terminal);
  const log = await logEvents(runId);
  expect(log.filter((e) => e.seq >= terminal.seq && !isTerminalEvent(e))).toEqual([]);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run.lastSeq).toBe(terminal.seq);
}

describe("a run ended elsewhere while its worker is still executing it", () => {
  it("keeps exactly one terminal event, last, everywhere, and the worker stops", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:40] ended by a sweeper" }, headers: tenant.headers });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 4);
    const runId: string = live.events[0].run_id;
    const taskId: string = live.events[0].task_id;

    // What a sweeper does when it wrongly takes a live worker's run for an orphan.
    const store = { prisma, redis, redisPrefix: stack.env.REDIS_PREFIX! };
    expect(await failRun(store, { id: runId, query: "q" }, { code: "worker_lost", message: "swept" })).toBe(true);

    const streamed = (await live.result).events;
    const terminal = streamed.at(-1)!.data as RunEvent;
    expect(terminal).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
    expect(streamed.filter((e) => isTerminalEvent(e.data))).toHaveLength(1);
    expect(streamed.map((e) => Number(e.id))).toEqual(streamed.map((_, i) => i + 1));

    // The worker would have streamed 40 chunks 100 ms apart and flushed every second.
    await sleep(2500);
    await expectEndedOnce(runId, terminal);
    const logLength = (await logEvents(runId)).length;
    await sleep(500);
    expect((await logEvents(runId)).length).toBe(logLength);

    const url = `${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/events`;
    const replay = await readSse(url, { headers: { ...tenant.headers, "last-event-id": String(terminal.seq - 1) } });
    expect(replay.events.map((e) => e.data)).toEqual([terminal]);
    const after = await fetch(url, { headers: { ...tenant.headers, "last-event-id": String(terminal.seq) } });
    expect(after.status).toBe(204);
  });

  it("a worker paused past its job lock resumes to find its run taken over, and adds nothing", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:150][chunks:40] paused worker" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    const paused = stack.workerById(workerId!);
    paused.child.kill("SIGSTOP");
    try {
      // The other worker gets the stalled job once the lock lapses and ends the run (it had emitted events).
      await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "failed", { timeoutMs: 20_000 });
    } finally {
      paused.child.kill("SIGCONT");
    }
    const streamed = (await live.result).events;
    const terminal = streamed.at(-1)!.data as RunEvent;
    expect(terminal).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
    // The resumed worker's model stream goes on for a while: nothing of it may land.
    await sleep(3000);
    await expectEndedOnce(runId, terminal);
  });

  it("a live worker whose heartbeat and job lock lapsed (a Redis outage longer than the lock) keeps its run", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:200][chunks:30] outlived the lock" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    const prefix = stack.env.REDIS_PREFIX!;
    const hbKey = runHeartbeatKey(prefix, runId);
    // What the outage leaves behind: the heartbeat and the job's lock expired while the worker
    // could not renew them (held here with SIGSTOP); the stalled job goes to the other worker,
    // which finds no heartbeat and sets its own. The worker then goes on (Redis is back).
    const owner = stack.workerById(workerId!);
    owner.child.kill("SIGSTOP");
    try {
      await redis.del(hbKey, `${prefix}:bull:agent-runs:${runId}:lock`);
      await eventually(async () => ![null, workerId].includes(await redis.get(hbKey)), { timeoutMs: 15_000, intervalMs: 10 });
    } finally {
      owner.child.kill("SIGCONT");
    }
    const streamed = (await live.result).events;
    expect(streamed.at(-1)!.data).toMatchObject({ type: "run_completed" });
    expect(streamed.flatMap((e) => (e.data.type === "text_chunk" ? [e.data.content] : [])).join("")).toBe("Echo: outlived the lock");
    expect(streamed.map((e) => Number(e.id))).toEqual(streamed.map((_, i) => i + 1));
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    expect(run).toMatchObject({ status: "completed", workerId });
    expect(run.output).toBe("Echo: outlived the lock");
  });

  it("a worker whose claim PostgreSQL lost (a crash undid its asynchronous commit) still ends the run as its own", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:30] claim lost" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const taskId: string = live.events[0].task_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    await loseClaim(prisma, runId);
    // Its next batch of events takes the run back, as claimed.
    await eventually(async () => {
      const [run, task] = await Promise.all([prisma.run.findUniqueOrThrow({ where: { id: runId } }), prisma.task.findUniqueOrThrow({ where: { id: taskId } })]);
      return run.status === "running" && run.workerId === workerId && run.startedAt !== null && task.status === "running";
    }, { timeoutMs: 5000, intervalMs: 50 });
    const streamed = (await live.result).events;
    const terminal = streamed.at(-1)!.data as RunEvent;
    expect(terminal).toMatchObject({ type: "run_completed" });
    expect(streamed.flatMap((e) => (e.data.type === "text_chunk" ? [e.data.content] : [])).join("")).toBe("Echo: claim lost");
    expect(streamed.map((e) => Number(e.id))).toEqual(streamed.map((_, i) => i + 1));
    // Every event stored (the batches flushed after the loss too), the answer and the charge kept.
    await expectEndedOnce(runId, terminal);
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(streamed.map((e) => Number(e.id)));
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    expect(run).toMatchObject({ status: "completed", output: "Echo: claim lost", workerId });
    expect(run.creditsUsed).toBeGreaterThan(0);
    const charged = await prisma.creditLedgerEntry.aggregate({ where: { runId }, _sum: { amount: true } });
    expect(charged._sum.amount).toBe(-run.creditsUsed);
    const task = await prisma.task.findUniqueOrThrow({ where: { id: taskId } });
    expect(task).toMatchObject({ status: "completed", activeRunId: null, creditsUsed: run.creditsUsed });
    const answers = await prisma.message.findMany({ where: { runId, role: "assistant" } });
    expect(answers.map((m) => m.content)).toEqual(["Echo: claim lost"]);
  });

  it("a run whose claim PostgreSQL lost, cancelled before its worker took it back, is cancelled by that worker, its events in one sequence", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:200][chunks:30] cancelled after the loss" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const taskId: string = live.events[0].task_id;
    await loseClaim(prisma, runId);
    const res = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/cancel`, { method: "POST", headers: tenant.headers });
    expect(res.status).toBe(202);
    const streamed = (await live.result).events;
    const terminal = streamed.at(-1)!.data as RunEvent;
    expect(terminal).toMatchObject({ type: "run_cancelled" });
    expect(streamed.filter((e) => isTerminalEvent(e.data))).toHaveLength(1);
    expect(streamed.map((e) => Number(e.id))).toEqual(streamed.map((_, i) => i + 1));
    await expectEndedOnce(runId, terminal);
    expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(streamed.map((e) => Number(e.id)));
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "cancelled" });
  });

  it("a worker whose run was taken over while it waited leaves the new owner's heartbeat alone", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:5000] slow model" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e) => e.type === "run_started");
    const runId: string = live.events[0].run_id;
    await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "running");
    const prefix = stack.env.REDIS_PREFIX!;
    // What a worker taking the stalled job over does: the run, its writer key and its heartbeat become its own.
    await prisma.run.update({ where: { id: runId }, data: { workerId: "worker-new-owner" } });
    await takeOverRunWriter(redis, runWriterKey(prefix, runId), "worker-new-owner", RUN_LOG_TTL_LIVE_S);
    await redis.set(runHeartbeatKey(prefix, runId), "worker-new-owner", "PX", 30_000);
    // The old worker stops waiting for its model (a cancel reaches it) and ends without emitting anything more.
    await redis.multi().set(runCancelKey(prefix, runId), "1", "EX", 60).publish(controlChannel(prefix), JSON.stringify({ type: "cancel", run_id: runId })).exec();
    await sleep(1500);
    expect(await redis.get(runHeartbeatKey(prefix, runId))).toBe("worker-new-owner");
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    expect(run.status).toBe("running"); // its end was not stored: the run is the new owner's
    // Clean up as the new owner would.
    await failRun({ prisma, redis, redisPrefix: prefix }, { id: runId, query: "q" }, { code: "worker_lost", message: "test" });
    expect((await live.result).events.at(-1)!.data.type).toBe("run_failed");
  });
});
