import { once } from "node:events";
import type { PrismaClient } from "@agentrun/db";
import { createTenant, eventually, testEnv, testPrisma, watchSse } from "@agentrun/testing";
import { commandLine, expectStackGone, listening, processesWith, startNpmStart } from "./npm-start.fixture";

// `npm start` (and `npm run dev`, which shares its supervisor) stops the stack in order: the
// gateway and the workers first, then the memory service and the scripted model, each worker
// with its whole SHUTDOWN_GRACE_MS. Ctrl-C in a terminal signals the whole foreground group:
// here, npm's own group.

jest.setTimeout(120_000);

let prisma: PrismaClient;
beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
});
afterAll(async () => {
  await prisma?.$disconnect();
});

it("Ctrl-C lets a run finish whose tool call and next model call come after it, past 12 s, within SHUTDOWN_GRACE_MS", async () => {
  const stack = await startNpmStart({ SHUTDOWN_GRACE_MS: "25000" });
  try {
    const tenant = await createTenant(prisma);
    // About 7 s for the model to ask for memory_save, the call to the memory service, then about
    // 7 s more of answer: the memory service and the model are needed long after the signal.
    const content = `kept through a stop ${Date.now()}`;
    const query = `[sleep:1200][chunks:6][call:memory_save ${JSON.stringify({ content, category: "fact" })}]`;
    const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query, context: { user_id: "u1" } }, headers: tenant.headers });
    await w.waitFor((e) => e.type === "run_started");
    const { run_id } = w.events[0];
    // Signalled once a worker has the run: a job still queued when the workers stop waits in
    // the queue for the next start (on a busy machine the pick-up can come after run_started).
    await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: run_id }, select: { status: true } })).status === "running", { timeoutMs: 20_000, intervalMs: 25 });
    const exited = once(stack.npm, "exit");
    const signalledAt = Date.now();
    process.kill(-stack.npm.pid!, "SIGINT");
    // The gateway ends its open streams at once (their clients re-attach elsewhere).
    expect((await w.result).events.at(-1)!.data.type).not.toMatch(/^run_(completed|failed|cancelled)$/);
    const run = await eventually(async () => {
      const r = await prisma.run.findUniqueOrThrow({ where: { id: run_id }, select: { status: true, errorCode: true, completedAt: true } });
      return r.status !== "running" && r.status !== "queued" && r;
    }, { timeoutMs: 40_000, intervalMs: 500 });
    expect(run).toMatchObject({ status: "completed", errorCode: null });
    expect(run.completedAt!.getTime() - signalledAt).toBeGreaterThan(12_000);
    const saved = await prisma.memoryEntry.findMany({ where: { orgId: tenant.orgId, userId: "u1" }, select: { content: true } });
    expect(saved).toEqual([{ content }]);
    await exited;
    expect(processesWith(stack.marker).map(commandLine)).toEqual([]);
    for (const port of Object.values(stack.ports)) expect([port, await listening(port)]).toEqual([port, false]);
    // The stored events: the tool call and its result, then the second answer whole, then the end.
    const batches = await prisma.runEventBatch.findMany({ where: { runId: run_id }, orderBy: { firstSeq: "asc" } });
    const events = batches.flatMap((b) => b.events as { type: string; content?: string; status?: string }[]);
    expect(events.map((e) => e.type).filter((t) => t !== "text_chunk")).toEqual(["run_started", "tool_call", "tool_result", "run_completed"]);
    expect(events.filter((e) => e.type === "text_chunk").map((e) => e.content).join("")).toMatch(/^Tool memory_save returned: \{.*"saved":true/);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${stack.output().slice(-4000)}`);
  } finally {
    await stack.cleanUp();
  }
});

it("a supervisor killed with SIGKILL does not leave its services running", async () => {
  const stack = await startNpmStart();
  try {
    const [supervisor] = processesWith(stack.marker).filter((pid) => commandLine(pid).includes("scripts/start.ts"));
    expect(supervisor).toBeGreaterThan(0);
    process.kill(supervisor!, "SIGKILL");
    // Each service sees its channel to the supervisor close and stops as on SIGTERM.
    await expectStackGone(stack, 20_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${stack.output().slice(-4000)}`);
  } finally {
    await stack.cleanUp();
  }
});
