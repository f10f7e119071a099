import { createTenant, startStack, testEnv, testPrisma, watchSse, type SseResponse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(120_000);

// kill -9 of a worker in the middle of its runs, with the workers' default timings (job lock
// 10 s, stall check every 5 s, orphan sweep after 10 s): its runs end within 30 s, their streams
// get the terminal event, and the runs of the other worker go on, none of their events lost.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  // Three runs per worker: six runs at once take both.
  stack = await startStack({ workers: 2, workerEnv: { WORKER_CONCURRENCY: "3" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** The stream's events are seq 1, 2, 3… once each, and exactly what the store holds. */
async function expectWholeAndStored(res: SseResponse): Promise<void> {
  const seqs = res.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, k) => k + 1));
  expect(await readDbEvents({ prisma }, res.events[0]!.data.run_id)).toEqual(res.events.map((e) => e.data));
}

it("ends the runs of a killed worker within 30 s, with their terminal events, while the other worker's runs complete", async () => {
  // About a chunk every 600 ms for ten seconds each.
  const watches = Array.from({ length: 6 }, (_, i) => watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[sleep:600][chunks:20] answer ${i}` }, headers: tenant.headers, timeoutMs: 90_000 }));
  for (const w of watches) await w.waitFor((e) => e.type === "text_chunk");
  const runIds = watches.map((w) => w.events[0].run_id as string);
  const workerOf = new Map((await prisma.run.findMany({ where: { id: { in: runIds } }, select: { id: true, workerId: true } })).map((r) => [r.id, r.workerId!]));
  expect(new Set(workerOf.values()).size).toBe(2);
  const victimId = workerOf.get(runIds[0]!)!;
  await stack.workerById(victimId).kill();
  const killedAt = Date.now();

  const ends = await Promise.all(watches.map(async (w) => ({ res: await w.result, at: Date.now() })));
  for (const [i, { res, at }] of ends.entries()) {
    const runId = runIds[i]!;
    const terminal = res.events.at(-1)!.data;
    if (workerOf.get(runId) === victimId) {
      expect(terminal).toMatchObject({ type: "run_failed", run_id: runId, error: { code: "worker_lost" } });
      expect(at - killedAt).toBeLessThan(30_000);
    } else {
      expect(terminal).toMatchObject({ type: "run_completed", run_id: runId });
      expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe(`Echo: answer ${i}`);
    }
    await expectWholeAndStored(res);
  }
  // Every run ended as its stream says, its task free; and nothing was added to any run after its end.
  const runs = await prisma.run.findMany({ where: { id: { in: runIds } }, include: { task: true } });
  for (const run of runs) {
    expect(run.status).toBe(workerOf.get(run.id) === victimId ? "failed" : "completed");
    expect(run.task.activeRunId).toBeNull();
  }
  const stored = await Promise.all(runIds.map((id) => readDbEvents({ prisma }, id)));
  await new Promise((r) => setTimeout(r, 2000));
  expect(await Promise.all(runIds.map((id) => readDbEvents({ prisma }, id)))).toEqual(stored);
});
