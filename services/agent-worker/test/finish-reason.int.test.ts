import { createTenant, readSse, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

// An answer the model ended early (its token limit, its content filter) completes with what it
// said, and says why: in run_completed, on the run, and in the JSON answer.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, memory: false }, tenant: { credits: 100 } });

const run = (query: string) => readSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: tenant.headers });
const runJson = (query: string) => fetch(`${stack.gatewayUrl}/api/run`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: JSON.stringify({ query, stream: false }) });

it.each(["length", "content_filter"] as const)("completes a run whose answer the model ended with finish_reason %s, and says so", async (reason) => {
  const res = await run(`[finish:${reason}][chunks:3] cut short`);
  const events = res.events.map((e) => e.data);
  expect(events.at(-1)).toMatchObject({ type: "run_completed", finish_reason: reason });
  const runId = events[0]!.run_id as string;
  const taskId = events[0]!.task_id as string;
  expect(await readDbEvents({ prisma }, runId)).toEqual(events);

  const view = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}`, { headers: tenant.headers }).then((r) => r.json());
  expect(view).toMatchObject({ status: "completed", output: "Echo: cut short", finish_reason: reason });
});

it("runs none of the tool calls of an answer cut short while asking for them, and completes with what it said", async () => {
  const tooling = await createTenant(prisma, { tools: ["clock"], credits: 100 });
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[finish:length][preface][call:clock_now] Checking the time" }, headers: tooling.headers });
  const events = res.events.map((e) => e.data);
  expect(events.filter((e) => e.type !== "text_chunk").map((e) => e.type)).toEqual(["run_started", "run_completed"]);
  expect(events.at(-1)).toMatchObject({ finish_reason: "length" });
  const stored = await prisma.run.findUniqueOrThrow({ where: { id: events[0]!.run_id as string } });
  expect(stored).toMatchObject({ status: "completed", toolCallCount: 0, finishReason: "length", output: "Checking the time" });
});

it("says nothing of it for an answer the model finished, and answers it in the JSON form", async () => {
  const done = await run("[chunks:2] whole");
  const terminal = done.events.at(-1)!.data;
  expect(terminal.type).toBe("run_completed");
  expect(terminal).not.toHaveProperty("finish_reason");
  const view = await fetch(`${stack.gatewayUrl}/api/tasks/${done.events[0]!.data.task_id}/runs/${terminal.run_id}`, { headers: tenant.headers }).then((r) => r.json());
  expect(view).not.toHaveProperty("finish_reason");

  const json = await runJson("[finish:length] in one answer");
  expect(json.status).toBe(200);
  expect(await json.json()).toMatchObject({ status: "completed", output: "Echo: in one answer", finish_reason: "length" });
});
