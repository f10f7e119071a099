import { stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(180_000);

// kill -9 of a worker while every other worker is busy with a long run (one slot each, default
// timings): the killed worker's run cannot wait for its job to reach a free worker, which would
// only end it; it ends within 30 s all the same, while the long run goes on.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 2, workerEnv: { WORKER_CONCURRENCY: "1" } } });

it("ends a killed worker's run within 30 s while the other worker is busy with a long run", async () => {
  // About 70 s on the worker that survives.
  const busy = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[sleep:1000][chunks:70] ${"a long answer ".repeat(10)}` }, headers: tenant.headers, timeoutMs: 150_000 });
  await busy.waitFor((e) => e.type === "text_chunk");
  const victim = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:600][chunks:40] on the killed worker" }, headers: tenant.headers, timeoutMs: 150_000 });
  await victim.waitFor((e) => e.type === "text_chunk");
  const [busyRun, victimRun] = await Promise.all([busy, victim].map((w) => prisma.run.findUniqueOrThrow({ where: { id: w.events[0].run_id } })));
  expect(busyRun!.workerId).not.toBe(victimRun!.workerId);
  await stack.workerById(victimRun!.workerId!).kill();
  const killedAt = Date.now();

  const res = await victim.result;
  expect(Date.now() - killedAt).toBeLessThan(30_000);
  expect(res.events.at(-1)!.data).toMatchObject({ type: "run_failed", run_id: victimRun!.id, error: { code: "worker_lost" } });
  // Every event once, in order, as stored; the run ended as its stream says, its task free.
  const seqs = res.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, k) => k + 1));
  expect(await readDbEvents({ prisma }, victimRun!.id)).toEqual(res.events.map((e) => e.data));
  expect(await prisma.run.findUniqueOrThrow({ where: { id: victimRun!.id }, include: { task: true } })).toMatchObject({ status: "failed", errorCode: "worker_lost", task: { activeRunId: null } });
  // The long run was still going when it ended, and goes on to complete.
  expect(busy.events.some((e) => e.type === "run_completed")).toBe(false);
  const done = await busy.result;
  expect(done.events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id: busyRun!.id });
  expect(await prisma.run.findUniqueOrThrow({ where: { id: busyRun!.id } })).toMatchObject({ status: "completed" });
});
