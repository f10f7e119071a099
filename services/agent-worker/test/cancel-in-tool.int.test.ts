import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createTenant, eventually, stackWithTenant, watchSse, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

// A run cancelled while a tool runs: the call it announced is recorded with what stopped it, in
// its events, its tool_call_count, its credits and its messages, before run_cancelled.
let stack: Stack;
let prisma: PrismaClient;

stackWithTenant((started) => ({ stack, prisma } = started), { stack: { workers: 1, workerEnv: { HTTP_TOOL_ALLOW_PRIVATE: "true", HTTP_TOOL_TIMEOUT_MS: "60000" } } });

let server: Server;
let hangUrl: string;
let onRequest = () => {};
/** Resolves when the site has received the tool's next request (which it never answers). */
const nextRequest = () => new Promise<void>((resolve) => (onRequest = resolve));

beforeAll(async () => {
  server = createServer(() => onRequest());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hangUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hang`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

it("records the call a cancel interrupted: tool_result 'stopped', counted and charged, stored as a message", async () => {
  const fetcher = await createTenant(prisma, { tools: ["http"], httpAllowlist: ["127.0.0.1"], credits: 100 });
  const query = `[call:http_get {"url":"${hangUrl}"}]`;
  const requested = nextRequest();
  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: fetcher.headers });
  await w.waitFor((e) => e.type === "tool_call");
  await requested;
  const { run_id, task_id } = w.events[0];
  const cancel = await fetch(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/cancel`, { method: "POST", headers: fetcher.headers });
  expect(cancel.status).toBe(202);

  const events = (await w.result).events.map((e) => e.data);
  expect(events.map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "run_cancelled"]);
  const [call, result] = [events[1]!, events[2]!];
  expect(result).toMatchObject({ tool: "http", action: "get", call_id: call.call_id, result: { error: { code: "stopped", message: expect.any(String) } } });
  expect(await readDbEvents({ prisma }, run_id)).toEqual(events);

  const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id } });
  expect(run).toMatchObject({ status: "cancelled", toolCallCount: 1 });
  // The base price, the tool call that ran, and the model call's tokens.
  expect(run.creditsUsed).toBe(1 + 1 + Math.ceil((run.promptTokens + run.completionTokens) / 1000));
  const messages = await prisma.message.findMany({ where: { runId: run_id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  expect(messages.map((m) => m.role)).toEqual(["user", "tool"]);
  expect(messages[1]).toMatchObject({ tool: "http", action: "get", params: { url: hangUrl }, result: { error: { code: "stopped" } } });
  // The cancel reached the tool too: the site's connection was closed.
  await eventually(async () => (await new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))))) === 0);
});

it("stores the text said before the interrupted call once, as its own message, and not as the run's output", async () => {
  const fetcher = await createTenant(prisma, { tools: ["http"], httpAllowlist: ["127.0.0.1"], credits: 100 });
  const query = `[preface][call:http_get {"url":"${hangUrl}"}] Checking the site.`;
  const requested = nextRequest();
  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: fetcher.headers });
  await w.waitFor((e) => e.type === "tool_call");
  await requested;
  const { run_id, task_id } = w.events[0];
  expect((await fetch(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/cancel`, { method: "POST", headers: fetcher.headers })).status).toBe(202);

  const events = (await w.result).events.map((e) => e.data);
  expect(events.filter((e) => e.type === "text_chunk").map((e) => e.content).join("")).toBe("Checking the site.");
  expect(events.at(-1)).toMatchObject({ type: "run_cancelled" });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id } });
  expect({ status: run.status, output: run.output }).toEqual({ status: "cancelled", output: "" });
  const messages = await prisma.message.findMany({ where: { runId: run_id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  expect(messages.map((m) => [m.role, m.role === "tool" ? "" : m.content])).toEqual([
    ["user", query],
    ["assistant", "Checking the site."],
    ["tool", ""],
  ]);
});
