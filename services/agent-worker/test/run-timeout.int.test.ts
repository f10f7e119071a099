import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createTenant, readSse, stackWithTenant, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

// RUN_TIMEOUT_MS bounds a whole run, whatever it is doing when the time is up: streaming an
// answer (each model call well within MODEL_TIMEOUT_MS) or waiting for a tool.
const RUN_TIMEOUT_MS = 2500;
let stack: Stack;
let prisma: PrismaClient;

stackWithTenant((started) => ({ stack, prisma } = started), {
  stack: { workers: 1, memory: false, workerEnv: { RUN_TIMEOUT_MS: String(RUN_TIMEOUT_MS), MODEL_TIMEOUT_MS: "60000", HTTP_TOOL_ALLOW_PRIVATE: "true", HTTP_TOOL_TIMEOUT_MS: "60000" } },
});

let server: Server;
let hangUrl: string;

beforeAll(async () => {
  server = createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hangUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hang`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const TIMED_OUT = { code: "run_timeout", message: "The run took longer than its time limit." };

it("fails with run_timeout a run still streaming its answer at RUN_TIMEOUT_MS, charging what it consumed", async () => {
  const tenant = await createTenant(prisma, { credits: 100 });
  const t0 = Date.now();
  // A chunk every 400 ms: about 8 s in all.
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:400][chunks:20] a long answer" }, headers: tenant.headers, timeoutMs: 20_000 });
  const elapsed = Date.now() - t0;
  const events = res.events.map((e) => e.data);
  expect(events[0]!.type).toBe("run_started");
  expect(events.filter((e) => e.type === "text_chunk").length).toBeGreaterThanOrEqual(2);
  expect(events.at(-1)).toMatchObject({ type: "run_failed", error: TIMED_OUT });
  expect(elapsed).toBeGreaterThanOrEqual(RUN_TIMEOUT_MS);
  expect(elapsed).toBeLessThan(RUN_TIMEOUT_MS + 2500);

  const runId = events[0]!.run_id as string;
  expect(await readDbEvents({ prisma }, runId)).toEqual(events);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "failed", errorCode: "run_timeout", output: "" });
  // Like a run stopped by its step limit, it pays for the model call it made (base price + tokens).
  expect(run.creditsUsed).toBe(1 + Math.ceil((run.promptTokens + run.completionTokens) / 1000));
  const org = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
  expect(org.creditBalance).toBe(100 - run.creditsUsed);
}, 30_000);

it("fails with run_timeout a run waiting for a tool at RUN_TIMEOUT_MS, recording the call it interrupted", async () => {
  const fetcher = await createTenant(prisma, { tools: ["http"], httpAllowlist: ["127.0.0.1"], credits: 100 });
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[call:http_get {"url":"${hangUrl}"}]` }, headers: fetcher.headers, timeoutMs: 20_000 });
  const events = res.events.map((e) => e.data);
  expect(events.map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "run_failed"]);
  expect(events[2]).toMatchObject({ tool: "http", action: "get", result: { error: { code: "stopped" } } });
  expect(events[3]).toMatchObject({ error: TIMED_OUT });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: events[0]!.run_id as string } });
  expect(run).toMatchObject({ status: "failed", errorCode: "run_timeout", toolCallCount: 1 });
}, 30_000);
