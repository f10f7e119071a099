import { readDbEvents } from "@agentrun/events";
import { stackWithTenant, readSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// MODEL_TIMEOUT_MS bounds a model call to its last streamed chunk, not only to its headers: a
// model that keeps streaming within the idle timeout is still stopped when the call is too long.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { memory: false, workerEnv: { MODEL_TIMEOUT_MS: "2000", MODEL_IDLE_TIMEOUT_MS: "1500" } } });

it("fails with model_timeout a run whose model is still streaming after MODEL_TIMEOUT_MS", async () => {
  const t0 = Date.now();
  // A chunk every 700 ms: never idle for 1500 ms, about 7 s in all.
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:700][chunks:10] a long answer" }, headers: tenant.headers });
  const elapsed = Date.now() - t0;
  const types = res.events.map((e) => e.data.type);
  expect(types[0]).toBe("run_started");
  expect(types.at(-1)).toBe("run_failed");
  expect(types.filter((t) => t === "text_chunk").length).toBeGreaterThanOrEqual(1);
  const terminal = res.events.at(-1)!.data;
  expect(terminal.error).toEqual({ code: "model_timeout", message: "The model call took longer than 2000 ms." });
  expect(elapsed).toBeLessThan(5000);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: terminal.run_id } });
  expect(run).toMatchObject({ status: "failed", errorCode: "model_timeout" });
  // Stored as streamed: every event once, in order, the text before the timeout included.
  expect(res.events.map((e) => Number(e.id))).toEqual(res.events.map((_, k) => k + 1));
  expect(await readDbEvents({ prisma }, terminal.run_id)).toEqual(res.events.map((e) => e.data));
}, 30_000);
