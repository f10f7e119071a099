import { createTenant, eventually, freePort, startService, startStack, testEnv, testPrisma, watchSse, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// A whole stack stopped at once, as Ctrl-C on `npm run dev` does (every process of the group gets
// the signal): a run that the worker's shutdown grace covers still finishes, because its model
// (the scripted model) keeps the stream going for longer than that grace.

let stack: Stack;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ memory: false });
  prisma = testPrisma(testEnv().databaseUrl);
});
afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

it("lets a run the worker's grace covers complete when the worker and the model get SIGTERM together", async () => {
  const tenant = await createTenant(prisma);
  // About 7 s of answer: past the 5 s the model used to allow, within the worker's 10 s grace.
  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:700][chunks:10] finish me" }, headers: tenant.headers });
  await w.waitFor((e) => e.type === "text_chunk");
  const { run_id } = w.events[0];
  const exits = [stack.workers[0]!, stack.model].map((p) => new Promise<number | null>((r) => p.child.once("exit", (code) => r(code))));
  stack.workers[0]!.child.kill("SIGTERM");
  stack.model.child.kill("SIGTERM");
  const done = await w.result;
  expect(done.events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id });
  expect(done.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: finish me");
  expect(await prisma.run.findUniqueOrThrow({ where: { id: run_id }, select: { status: true, errorCode: true } })).toEqual({ status: "completed", errorCode: null });
  // Both exit cleanly once the run is over.
  expect(await Promise.all(exits)).toEqual([0, 0]);
}, 30_000);

it("exits on SIGTERM while start-up still waits for Redis, after its shutdown grace", async () => {
  // A port nobody listens on: the worker retries Redis for ever.
  const worker = startService("agent-worker", { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, SHUTDOWN_GRACE_MS: "500", LOG_LEVEL: "info" });
  try {
    // Started: it has logged its first failed connection.
    await eventually(async () => /redis/i.test(worker.output()));
    const exited = new Promise<number | null>((r) => worker.child.once("exit", (code) => r(code)));
    worker.child.kill("SIGTERM");
    const gaveUp = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still running 15 s after SIGTERM:\n${worker.output().slice(-2000)}`)), 15_000).unref());
    expect(await Promise.race([exited, gaveUp])).toBe(1);
    expect(worker.output()).toMatch(/start-up did not finish; exiting/);
  } finally {
    await worker.stop(1000);
  }
}, 40_000);
