import { createTenant, stackWithTenant, watchSse, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// A run cancelled while its tool call waits for the worker's own capacity (both calc threads
// busy with other runs' calculations): the call never ran, so it is recorded as stopped before it
// started, and not charged.
let stack: Stack;
let prisma: PrismaClient;

stackWithTenant((started) => ({ stack, prisma } = started), { stack: { workers: 1 } });

/** Computes past the calculator's time limit (1 s), holding a calc thread that long. */
const SLOW = "f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(40)";
const calcCall = (expression: string) => `[call:calc_evaluate ${JSON.stringify({ expression })}]`;

it("records a call cancelled while it waited for a calc thread as stopped before it started, not charged", async () => {
  const tenant = await createTenant(prisma, { tools: ["calc"], credits: 1000 });
  // Two slow calculations on the two threads and two more in line: the next one waits seconds.
  const slow = Array.from({ length: 4 }, () => watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: calcCall(SLOW) }, headers: tenant.headers }));
  await Promise.all(slow.map((w) => w.waitFor((e) => e.type === "tool_call")));

  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: calcCall("1 + 1") }, headers: tenant.headers });
  await w.waitFor((e) => e.type === "tool_call");
  const { run_id, task_id } = w.events[0];
  expect((await fetch(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/cancel`, { method: "POST", headers: tenant.headers })).status).toBe(202);

  const events = (await w.result).events.map((e) => e.data);
  expect(events.map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "run_cancelled"]);
  expect(events[2]).toMatchObject({ tool: "calc", action: "evaluate", result: { error: { code: "stopped", message: "The run was stopped before this tool started; it did not run." } } });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id } });
  expect(run).toMatchObject({ status: "cancelled", toolCallCount: 1 });
  // The base price and the model call's tokens: no tool call.
  expect(run.creditsUsed).toBe(1 + Math.ceil((run.promptTokens + run.completionTokens) / 1000));
  const messages = await prisma.message.findMany({ where: { runId: run_id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  expect(messages.map((m) => m.role)).toEqual(["user", "tool"]);
  expect(messages[1]).toMatchObject({ tool: "calc", params: { expression: "1 + 1" }, result: { error: { code: "stopped" } } });

  // The slow runs' calculations ran out of time (the first two at least; on a slow machine one
  // waiting in line may find no thread free within the calculator's wait, "busy"); their runs
  // went on.
  const codes: string[] = [];
  for (const s of slow) {
    const ended = (await s.result).events.map((e) => e.data);
    codes.push(ended.find((e) => e.type === "tool_result")?.result?.error?.code);
    expect(ended.at(-1)).toMatchObject({ type: "run_completed" });
  }
  expect(codes.filter((c) => c === "too_expensive").length).toBeGreaterThanOrEqual(2);
  expect(codes.every((c) => c === "too_expensive" || c === "busy")).toBe(true);
}, 60_000);
