import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { controlChannel, runCancelKey, runHeartbeatKey, RunEventWriter } from "@agentrun/events";
import { finishRun } from "@agentrun/run-state";
import { createTestRun, eventually, testEnv, testStores } from "@agentrun/testing";
import { cancelRun, cancelRunAndWait } from "./cancel-run";

let prisma: PrismaClient;
let redis: Redis;
let sub: Redis;
const redisPrefix = `${testEnv().redisPrefix}:cancel`;
const control: string[] = [];

testStores({ subscriber: true }, (s) => ({ prisma, redis, sub } = s as Required<typeof s>));
beforeAll(async () => {
  sub.on("message", (_channel: string, msg: string) => control.push(msg));
  await sub.subscribe(controlChannel(redisPrefix));
});

const deps = () => ({ prisma, redis, redisPrefix });
const stateOf = (runId: string) => prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true, task: { select: { activeRunId: true } } } });

describe("cancelRun", () => {
  it("ends a queued run at once, without involving the workers", async () => {
    const runId = await createTestRun(prisma, "queued");
    await cancelRun(deps(), { id: runId, status: "queued", query: "q" });
    expect(await stateOf(runId)).toEqual({ status: "cancelled", task: { activeRunId: null } });
    expect(await redis.exists(runCancelKey(redisPrefix, runId))).toBe(0);
  });

  it("leaves a run that a worker claimed after it was read as queued to that worker, and tells it to stop", async () => {
    const runId = await createTestRun(prisma, "queued");
    // The caller read the run as queued; a worker claims it before the cancel goes through.
    await prisma.$queryRaw`SELECT * FROM agentrun_claim_run(${runId}, ${"worker-1"}, ${20}::integer)`;
    await cancelRun(deps(), { id: runId, status: "queued", query: "q" });
    // Not ended under the worker's feet: the worker ends it, with the events it emitted so far.
    expect(await stateOf(runId)).toEqual({ status: "running", task: { activeRunId: runId } });
    expect(await redis.get(runCancelKey(redisPrefix, runId))).toBe("1");
    await eventually(async () => control.some((m) => JSON.parse(m).run_id === runId), { timeoutMs: 2000, intervalMs: 10 });
  });

  it("ends cancelled a running run that its worker completes before it hears of the cancel", async () => {
    const runId = await createTestRun(prisma, "running");
    await prisma.run.update({ where: { id: runId }, data: { workerId: "w-late" } });
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w-late", flushIntervalMs: 600_000 });
    writer.emit({ type: "text_chunk", content: "All of it" });
    // The cancel is answered while the run is in progress; its worker's answer was complete.
    await cancelRun(deps(), { id: runId, status: "running", query: "q" });
    const usage = { promptTokens: 900, completionTokens: 100, toolCalls: 0, chargedToolCalls: 0, modelCalls: 1 };
    const terminal = await finishRun(deps(), { runId, status: "completed", output: "All of it", usage, messages: [{ role: "user", content: "q" }], writer });
    expect(terminal).toEqual({ seq: 3, type: "run_cancelled", run_id: runId });
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
    // What it said and what it used, as a run stopped a moment earlier.
    expect(run).toMatchObject({ status: "cancelled", output: "All of it", creditsUsed: 2, errorCode: null, lastSeq: 3, task: { status: "completed", activeRunId: null } });
    expect(run.cancelRequestedAt).toBeInstanceOf(Date);
    const stored = await prisma.runEventBatch.findMany({ where: { runId }, orderBy: { firstSeq: "asc" } });
    expect(stored.flatMap((b) => b.events as { type: string }[]).map((e) => e.type)).toEqual(["run_started", "text_chunk", "run_cancelled"]);
  });

  it("leaves a run completed that ended before the cancel, and does not mark it", async () => {
    const runId = await createTestRun(prisma, "running");
    const usage = { promptTokens: 10, completionTokens: 10, toolCalls: 0, chargedToolCalls: 0, modelCalls: 1 };
    expect(await finishRun(deps(), { runId, status: "completed", output: "done", usage, messages: [{ role: "user", content: "q" }] })).toMatchObject({ type: "run_completed" });
    await cancelRun(deps(), { id: runId, status: "running", query: "q" });
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true, cancelRequestedAt: true } })).toEqual({ status: "completed", cancelRequestedAt: null });
  });
});

describe("cancelRunAndWait", () => {
  const running = (id: string) => ({ id, status: "running", query: "q" }) as const;

  it("ends a running run whose worker is gone (no heartbeat) once the wait is over, as cancelled at no cost, with what its events show", async () => {
    const runId = await createTestRun(prisma, "running");
    // What its worker streamed before it died: a tool call, then the start of an answer.
    await prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
    const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
    writer.emit({ type: "tool_call", tool: "clock", action: "now", params: { zone: "UTC" }, call_id: "c1" });
    writer.emit({ type: "tool_result", tool: "clock", action: "now", result: { iso: "2026-11-28T00:00:00Z" }, call_id: "c1" });
    writer.emit({ type: "text_chunk", content: "It is mid" });
    await writer.drain();
    const started = Date.now();
    await cancelRunAndWait(deps(), running(runId), 300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true, creditsUsed: true, output: true, toolCallCount: true } });
    expect(run).toEqual({ status: "cancelled", creditsUsed: 0, output: "It is mid", toolCallCount: 1 });
    const messages = await prisma.message.findMany({ where: { runId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
    expect(messages.map((m) => [m.role, m.content, m.tool, m.params])).toEqual([
      ["user", "q", null, null],
      ["tool", '{"iso":"2026-11-28T00:00:00Z"}', "clock", { zone: "UTC" }],
      ["assistant", "It is mid", null, null],
    ]);
  });

  it("waits on for a worker that keeps the run's heartbeat, which then ends the run itself and charges what it used", async () => {
    const runId = await createTestRun(prisma, "running");
    await redis.set(runHeartbeatKey(redisPrefix, runId), "worker-slow", "PX", 10_000);
    let waitedMs = -1;
    const started = Date.now();
    const waiting = cancelRunAndWait(deps(), running(runId), 300).then(() => (waitedMs = Date.now() - started));
    // The worker missed the cancel message and finds the flag with a later heartbeat, past the wait.
    await new Promise((r) => setTimeout(r, 900));
    expect(waitedMs).toBe(-1);
    const usage = { promptTokens: 900, completionTokens: 100, toolCalls: 1, chargedToolCalls: 1, modelCalls: 1 };
    expect(await finishRun(deps(), { runId, status: "cancelled", usage, messages: [{ role: "user", content: "q" }] })).toBeTruthy();
    await waiting;
    expect(waitedMs).toBeGreaterThanOrEqual(900);
    // 1 + one tool call + 1,000 tokens: what the run consumed before it stopped.
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true, creditsUsed: true } })).toEqual({ status: "cancelled", creditsUsed: 3 });
    await redis.del(runHeartbeatKey(redisPrefix, runId));
  });
});
