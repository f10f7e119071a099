import { isTerminalEvent } from "@agentrun/contracts";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";
import { eventually, stackWithTenant, watchSse, type ServiceProcess, type SseResponse, type Stack, type Tenant } from "@agentrun/testing";

// A worker stopped with SIGTERM lets its runs finish within its grace; what is left then is
// stopped. A run that had emitted nothing but run_started (waiting for the model's first token)
// goes back to the queue, and another worker restarts it, as after a crash; one that had
// emitted events fails worker_shutdown, as a restart would repeat what it said.
const workerEnv = { SHUTDOWN_GRACE_MS: "1000", LOCK_DURATION_MS: "3000", STALLED_INTERVAL_MS: "1000" };

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 2, memory: false, workerEnv } });

/** Sends SIGTERM to the worker executing `runId` and resolves with its exit code. */
async function stopOwner(runId: string): Promise<{ owner: string; exited: Promise<number | null> }> {
  const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  const worker: ServiceProcess = stack.workerById(workerId!);
  const exited = new Promise<number | null>((resolve) => worker.child.once("exit", (code) => resolve(code)));
  worker.child.kill("SIGTERM");
  return { owner: workerId!, exited };
}

/** Seq 1, 2, 3… once each, one terminal event, last, and exactly what the store holds. */
async function expectWholeAndStored(res: SseResponse): Promise<void> {
  expect(res.events.map((e) => Number(e.id))).toEqual(res.events.map((_, i) => i + 1));
  expect(res.events.filter((e) => isTerminalEvent(e.data))).toHaveLength(1);
  expect(isTerminalEvent(res.events.at(-1)!.data)).toBe(true);
  expect(await readDbEvents({ prisma }, res.events[0]!.data.run_id)).toEqual(res.events.map((e) => e.data));
}

it("hands a run that emitted nothing back to the queue when the grace runs out, and another worker restarts and completes it", async () => {
  // The first token comes 3 s after the model is called: well past the 1 s grace.
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:3000][chunks:2] restarted elsewhere" }, headers: tenant.headers, timeoutMs: 60_000 });
  await watch.waitFor((e) => e.type === "run_started");
  const runId: string = watch.events[0].run_id;
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "running", { timeoutMs: 10_000, intervalMs: 25 });
  const { owner, exited } = await stopOwner(runId);
  expect(await exited).toBe(0);

  const res = await watch.result;
  await expectWholeAndStored(res);
  expect(res.events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id: runId });
  expect(res.events.filter((e) => e.data.type === "run_started")).toHaveLength(1);
  expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: restarted elsewhere");
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
  expect(run).toMatchObject({ status: "completed", errorCode: null });
  expect(run.workerId).not.toBe(owner);
  expect(run.task.activeRunId).toBeNull();
  // One user message and one answer: the stopped attempt left nothing behind.
  expect(await prisma.message.findMany({ where: { runId }, select: { role: true } })).toEqual([{ role: "user" }, { role: "assistant" }]);
  await stack.addWorker();
}, 90_000);

it("still fails a run that had emitted events with worker_shutdown when the grace runs out", async () => {
  // A chunk every 300 ms for 12 s: it has spoken before the SIGTERM and cannot end within the grace.
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:300][chunks:40] cut short" }, headers: tenant.headers, timeoutMs: 60_000 });
  await watch.waitFor((e) => e.type === "text_chunk");
  const runId: string = watch.events[0].run_id;
  const { exited } = await stopOwner(runId);
  expect(await exited).toBe(0);

  const res = await watch.result;
  await expectWholeAndStored(res);
  expect(res.events.at(-1)!.data).toMatchObject({ type: "run_failed", run_id: runId, error: { code: "worker_shutdown" } });
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "failed", errorCode: "worker_shutdown" });
  await stack.addWorker();
}, 90_000);

it("ends cancelled, without restarting it, a handed-back run whose cancel is recorded on its row but not flagged in Redis", async () => {
  // As when the cancel came while no worker had the run and Redis then lost its flag: the row
  // says cancelled, and the worker taking the job over must not call the model again.
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:3000][chunks:2] not again" }, headers: tenant.headers, timeoutMs: 60_000 });
  await watch.waitFor((e) => e.type === "run_started");
  const runId: string = watch.events[0].run_id;
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "running", { timeoutMs: 10_000, intervalMs: 25 });
  await prisma.run.update({ where: { id: runId }, data: { cancelRequestedAt: new Date() } });
  const { owner, exited } = await stopOwner(runId);
  expect(await exited).toBe(0);

  const res = await watch.result;
  await expectWholeAndStored(res);
  expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_cancelled"]);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
  expect(run).toMatchObject({ status: "cancelled", creditsUsed: 0 });
  expect(run.workerId).not.toBe(owner);
  expect(run.task.activeRunId).toBeNull();
  await stack.addWorker();
}, 90_000);
