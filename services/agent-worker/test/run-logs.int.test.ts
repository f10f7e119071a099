import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { eventually, runJson, stackWithTenant, watchSse, logLinesOf, type LogLine, type Stack, type Tenant } from "@agentrun/testing";

// What the workers' logs say about a run, read from their output at LOG_LEVEL=info: one line per
// run end carrying the gateway's request id, the end of a run taken over from a stopped worker,
// and a memory service that refuses the worker's token, said with the run and as a misconfiguration.
// Short stall timings: a paused worker's job goes to the other worker within seconds; no sweep meanwhile.
const workerEnv = {
  LOG_LEVEL: "info",
  LOCK_DURATION_MS: "2000",
  STALLED_INTERVAL_MS: "1000",
  RUN_STALE_AFTER_MS: "60000",
  MODEL_IDLE_TIMEOUT_MS: "20000",
  // Not the memory service's: every call of the workers to it is refused with 401.
  INTERNAL_TOKEN: "not-the-memory-services-token-0123456789",
};

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 2, workerEnv } });

/** The first line of any worker that `pred` accepts, once logged, with the worker's id. */
const workerLine = (pred: (l: LogLine) => boolean, timeoutMs = 10_000) =>
  eventually(async () => {
    for (const w of stack.workers) {
      const line = logLinesOf(w).find(pred);
      if (line) return line;
    }
    return undefined;
  }, { timeoutMs, intervalMs: 50 });

describe("a run's end in the worker's log", () => {
  it("is one info line with the run, its task, the gateway's request id, its counts and credits", async () => {
    const requestId = `logs-${randomUUID()}`;
    const res = await runJson(stack.gatewayUrl, { ...tenant.headers, "x-request-id": requestId }, { query: `what is 6*7 [call:calc_evaluate ${JSON.stringify({ expression: "6*7" })}]` });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("completed");
    const runId: string = res.body.run_id;
    const ended = await workerLine((l) => l.msg === "run ended" && l.runId === runId);
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    expect(ended).toMatchObject({ level: 30, runId, requestId, taskId: res.body.task_id, status: "completed", modelCalls: 2, toolCalls: 1, creditsUsed: run.creditsUsed });
    expect(ended.durationMs).toEqual(expect.any(Number));
    expect(ended).not.toHaveProperty("code");
    expect(logLinesOf(stack.workerById(run.workerId!)).filter((l) => l.msg === "run ended" && l.runId === runId)).toHaveLength(1);
  });

  it("gives a failed run's code", async () => {
    const requestId = `logs-${randomUUID()}`;
    const res = await runJson(stack.gatewayUrl, { ...tenant.headers, "x-request-id": requestId }, { query: "[error:400] refused by the model" });
    expect(res.body.status).toBe("failed");
    const ended = await workerLine((l) => l.msg === "run ended" && l.runId === res.body.run_id);
    expect(ended).toMatchObject({ requestId, status: "failed", code: res.body.error.code, modelCalls: 1, toolCalls: 0 });
    expect(ended).not.toHaveProperty("creditsUsed");
  });
});

describe("a run failed worker_lost by the worker that took its job over", () => {
  it("is logged by that worker with the run and the worker it was taken from", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:150][chunks:40] paused worker" }, headers: tenant.headers, timeoutMs: 30_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    const paused = stack.workerById(workerId!);
    paused.child.kill("SIGSTOP");
    try {
      await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "failed", { timeoutMs: 20_000 });
    } finally {
      paused.child.kill("SIGCONT");
    }
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
    const taker = stack.workers.find((w) => w !== paused)!;
    const line = await eventually(async () => logLinesOf(taker).find((l) => l.runId === runId && l.previousWorker === workerId), { timeoutMs: 5000, intervalMs: 50 });
    expect(line).toMatchObject({ level: 40, msg: "ended a run whose worker stopped" });
  });
});

describe("a memory service that refuses the worker's INTERNAL_TOKEN", () => {
  it("is logged with the run, the 401 and as a misconfiguration; the run goes on without memories", async () => {
    const res = await runJson(stack.gatewayUrl, tenant.headers, { query: "remember me?", context: { user_id: `user-${randomUUID()}` } });
    expect(res.body.status).toBe("completed");
    const line = await workerLine((l) => typeof l.msg === "string" && l.msg.startsWith("memories skipped") && l.runId === res.body.run_id);
    expect(line).toMatchObject({ level: 50, err: { message: expect.stringContaining("HTTP 401") } });
    expect(line.msg).toMatch(/INTERNAL_TOKEN.*misconfiguration/);
  });
});
