import { stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

jest.setTimeout(60_000);

// A lone worker paused (SIGSTOP, as a frozen VM) past MODEL_IDLE_TIMEOUT_MS while the model
// streams the rest of its answer: on SIGCONT, Node fires the expired idle timer before it reads
// the answer waiting in the worker's socket, which is still the run's answer, not a model_timeout.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { memory: false, workerEnv: { MODEL_IDLE_TIMEOUT_MS: "5000" } } });

it("completes the run whose model answered while its worker was paused past the idle timeout", async () => {
  // Six chunks 500 ms apart: the last five are sent within the pause.
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "buffered answer [sleep:500][chunks:6]" }, headers: tenant.headers, timeoutMs: 45_000 });
  // The model call under way: its first chunk came.
  await watch.waitFor((e) => e.type === "text_chunk");
  const worker = stack.workers[0]!.child;
  worker.kill("SIGSTOP");
  try {
    await new Promise((r) => setTimeout(r, 10_000));
  } finally {
    worker.kill("SIGCONT");
  }
  const res = await watch.result;
  const terminal = res.events.at(-1)!.data;
  expect(terminal).toMatchObject({ type: "run_completed" });
  expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: buffered answer");
  expect(await prisma.run.findUniqueOrThrow({ where: { id: terminal.run_id } })).toMatchObject({ status: "completed" });
});
