import type { PrismaClient } from "@agentrun/db";
import { createTenant, startStack, testEnv, testPrisma, watchSse, within, type Stack, type Tenant } from "@agentrun/testing";

// A run cancelled while its worker loads the user's memories from a memory service that does
// not answer: the cancel stops the run at once, without waiting out the memory timeout.
const MEMORY_TIMEOUT_MS = 60_000;

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { MEMORY_TIMEOUT_MS: String(MEMORY_TIMEOUT_MS) } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  // A frozen process would only act on SIGTERM once continued.
  stack?.memory?.child.kill("SIGCONT");
  await stack?.stop();
  await prisma?.$disconnect();
});

it("ends a run cancelled while its memories load as cancelled, without waiting for the memory service", async () => {
  stack.memory!.child.kill("SIGSTOP");
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "remember me", context: { user_id: "u1" } }, headers: tenant.headers, timeoutMs: 30_000 });
  await live.waitFor((e) => e.type === "run_started");
  const { run_id: runId, task_id: taskId } = live.events[0];
  // Claimed: the worker is waiting for the memory service.
  for (const deadline = Date.now() + 10_000; (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status !== "running"; ) {
    if (Date.now() > deadline) throw new Error("the run was never claimed");
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 300));
  const cancel = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/cancel`, { method: "POST", headers: tenant.headers });
  expect(cancel.status).toBe(202);
  // Well before the memory timeout: the stream ends with run_cancelled.
  const ended = await within(live.result, 15_000);
  expect(ended).not.toBe("timed out");
  expect((ended as Awaited<typeof live.result>).events.at(-1)!.data.type).toBe("run_cancelled");
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "cancelled", creditsUsed: 0 });
}, 60_000);
