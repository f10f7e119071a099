import { stackWithTenant, runJson, eventually, readSse, startStack, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

// Short stall and orphan timings so that a dead worker is noticed within seconds.
const workerEnv = { WORKER_CONCURRENCY: "3", LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000", RUN_STALE_AFTER_MS: "4000", MODEL_IDLE_TIMEOUT_MS: "1500", SHUTDOWN_GRACE_MS: "8000" };

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 2, workerEnv } });

const runResult = async (query: string) => (await runJson(stack.gatewayUrl, tenant.headers, { query })).body;

describe("agent workers", () => {
  it("shares the queue between two worker processes", async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => runResult(`[sleep:40][chunks:5] job ${i}`)));
    expect(results.map((r) => r.status)).toEqual(Array(12).fill("completed"));
    results.forEach((r, i) => expect(r.output).toBe(`Echo: job ${i}`));
    const runs = await prisma.run.findMany({ where: { id: { in: results.map((r) => r.run_id) } }, select: { workerId: true } });
    expect(new Set(runs.map((r) => r.workerId)).size).toBe(2);
  });

  it("fails a run with model_timeout when the model stops sending", async () => {
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:4000] too slow" }, headers: tenant.headers });
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
    expect(res.events[1]!.data.error.code).toBe("model_timeout");
  });

  it("ends a run whose worker is killed mid-run, streams the terminal event, and other runs go on", async () => {
    const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:300][chunks:60] long answer" }, headers: tenant.headers });
    const streaming = watch.result;
    // Wait until the run has streamed text, then kill the worker executing it.
    await watch.waitFor((e) => e.type === "text_chunk");
    const runId = watch.events[0].run_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    const victim = stack.workerById(workerId!);
    await victim.kill();
    const killedAt = Date.now();

    const res = await streaming;
    const terminal = res.events.at(-1)!.data;
    expect(terminal).toMatchObject({ type: "run_failed", run_id: runId, error: { code: "worker_lost" } });
    expect(Date.now() - killedAt).toBeLessThan(30_000);
    const seqs = res.events.map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
    expect(run.status).toBe("failed");
    expect(run.task.activeRunId).toBeNull();

    // The surviving worker still serves runs.
    const after = await runResult("still alive?");
    expect(after.status).toBe("completed");
  });

  it("ends as cancelled a run cancelled after its worker died mid-run, not as worker_lost", async () => {
    await stack.addWorker(workerEnv);
    const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:300][chunks:60] doomed answer" }, headers: tenant.headers });
    await watch.waitFor((e) => e.type === "text_chunk");
    const { run_id: runId, task_id: taskId } = watch.events[0];
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    await stack.workerById(workerId!).kill();
    const cancel = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/cancel`, { method: "POST", headers: tenant.headers });
    expect(cancel.status).toBe(202);

    const res = await watch.result;
    expect(res.events.at(-1)!.data).toEqual(expect.objectContaining({ type: "run_cancelled", run_id: runId }));
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
    expect({ status: run.status, error: run.errorCode, task: run.task.status, active: run.task.activeRunId }).toEqual({ status: "cancelled", error: null, task: "completed", active: null });
  });

  it("restarts on another worker a run whose worker died before it emitted anything", async () => {
    await stack.addWorker(workerEnv);
    const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:1200][chunks:2] second chance" }, headers: tenant.headers });
    const events = watch.events;
    const workerId = await eventually(async () => events[0] && (await prisma.run.findUniqueOrThrow({ where: { id: events[0].run_id } })).workerId, { intervalMs: 50 });
    await stack.workerById(workerId).kill();
    const res = await watch.result;
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "text_chunk", "text_chunk", "run_completed"]);
    expect(res.events.map((e) => Number(e.id))).toEqual([1, 2, 3, 4]);
    const run = await prisma.run.findUniqueOrThrow({ where: { id: events[0].run_id } });
    expect(run.status).toBe("completed");
    expect(run.workerId).not.toBe(workerId);
    expect(run.output).toBe("Echo: second chance");
  });

  it("lets active runs finish when a worker is stopped gracefully", async () => {
    const w = await stack.addWorker(workerEnv);
    for (const other of stack.workers.filter((x) => x !== w)) await other.stop();
    const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:15] graceful" }, headers: tenant.headers });
    // Stop the worker while it is executing the run (not before it picked the job up).
    await watch.waitFor((e) => e.type === "text_chunk");
    const stopped = w.stop(15_000);
    const res = await watch.result;
    await stopped;
    expect(w.child.exitCode).toBe(0);
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: graceful");
  });
});

describe("stream: false past the wait limit", () => {
  let slow: Stack;
  beforeAll(async () => {
    slow = await startStack({ workers: 1, gatewayEnv: { RUN_WAIT_TIMEOUT_MS: "800" }, memory: false });
  });
  afterAll(async () => {
    await slow?.stop();
  });

  it("answers 202 with the run id and status, and the run goes on to complete", async () => {
    const res = await fetch(`${slow.gatewayUrl}/api/run`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json" },
      body: JSON.stringify({ query: "[sleep:300][chunks:6] slow answer", stream: false }),
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as any;
    expect(body).toEqual({ run_id: expect.stringMatching(/^run_/), task_id: expect.stringMatching(/^task_/), status: expect.stringMatching(/^(queued|running)$/) });
    await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: body.run_id } })).status === "completed");
  });
});
