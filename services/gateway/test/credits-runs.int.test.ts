import { runJson, readSse, createTenant, eventually, startStack, testEnv, testPrisma, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { Redis } from "ioredis";

let stack: Stack;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

const runOf = (t: Tenant, query: string) => runJson(stack.gatewayUrl, t.headers, { query });
const balanceOf = async (orgId: string) => (await prisma.organization.findUniqueOrThrow({ where: { id: orgId } })).creditBalance;

/** The organization's balance, its ledger and its runs and tasks all tell the same story. */
async function expectBooksBalanced(orgId: string) {
  const balance = await balanceOf(orgId);
  // In `seq` order (taken under the organization's row lock) each entry starts where the previous one ended.
  const ledger = await prisma.creditLedgerEntry.findMany({ where: { orgId }, orderBy: { seq: "asc" } });
  expect(ledger.reduce((s, e) => s + e.amount, 0)).toBe(balance);
  expect(ledger.at(-1)!.balanceAfter).toBe(balance);
  let at = 0;
  for (const e of ledger) {
    expect({ seq: e.seq, startsAt: e.balanceAfter - e.amount }).toEqual({ seq: e.seq, startsAt: at });
    at = e.balanceAfter;
  }
  const tasks = await prisma.task.findMany({ where: { orgId }, include: { runs: true } });
  for (const task of tasks) expect(task.creditsUsed).toBe(task.runs.reduce((s, r) => s + r.creditsUsed, 0));
  const granted = ledger.filter((e) => e.reason === "grant").reduce((s, e) => s + e.amount, 0);
  const used = tasks.flatMap((t) => t.runs).reduce((s, r) => s + r.creditsUsed, 0);
  expect(balance).toBe(granted - used);
  return { balance, ledger, tasks };
}

it("never spends a credit twice: 10 concurrent runs on 3 credits → exactly 3 accepted, 7 refused with 402", async () => {
  const t = await createTenant(prisma, { credits: 3 });
  // Slow enough that every reservation is made before the first run settles its cost.
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => runOf(t, `[sleep:300] x${i}`)));
  const accepted = results.filter((r) => r.status === 200);
  const refused = results.filter((r) => r.status === 402);
  expect(accepted).toHaveLength(3);
  expect(refused).toHaveLength(7);
  for (const r of refused) expect(r.body).toEqual({ error: { code: "insufficient_credits", message: expect.any(String) } });
  for (const r of accepted) expect(r.body.status).toBe("completed");

  const { balance, tasks } = await expectBooksBalanced(t.orgId);
  // A refused request leaves no task or run behind.
  expect(tasks).toHaveLength(3);
  expect(balance).toBe(3 - accepted.reduce((s, r) => s + r.body.credits_used, 0));
  expect(balance).toBeLessThanOrEqual(0);
  // The next run is refused while the balance is not positive.
  expect((await runOf(t, "x")).status).toBe(402);
  // The gateway subscribes to a run's channel while recording it; a refused run leaves no
  // subscription behind (nor do the finished ones). A 402 can leave before Redis has confirmed
  // the subscription it then drops, so the channels are released shortly after, not at once.
  const redis = new Redis(stack.env.REDIS_URL!);
  const channels = () => redis.pubsub("CHANNELS", `${stack.env.REDIS_PREFIX}:run:*`) as Promise<string[]>;
  try {
    await eventually(async () => (await channels()).length === 0, { timeoutMs: 5000 }).catch(() => {});
    expect(await channels()).toEqual([]);
  } finally {
    redis.disconnect();
  }
});

it("charges 1 + tool calls + ceil(total tokens / 1000)", async () => {
  const t = await createTenant(prisma, { credits: 100 });
  // [usage:2500] makes each model call report 2500 tokens: 1 + 0 + ceil(2500 / 1000) = 4.
  const plain = await runOf(t, "[usage:2500] hello");
  expect(plain.body).toMatchObject({ status: "completed", credits_used: 4 });
  expect(await balanceOf(t.orgId)).toBe(96);

  const tools = await runOf(t, '[usage:2500] [call:calc_evaluate {"expression":"1+1"}] [call:clock_now {}]');
  expect(tools.body.status).toBe("completed");
  const run = await prisma.run.findUniqueOrThrow({ where: { id: tools.body.run_id } });
  expect(run.toolCallCount).toBe(2);
  // Two model calls (the tool calls, then the answer), 2500 tokens each.
  expect(run.promptTokens + run.completionTokens).toBe(5000);
  expect(run.creditsUsed).toBe(1 + 2 + 5);
  expect(tools.body.credits_used).toBe(8);
  expect(await balanceOf(t.orgId)).toBe(96 - 8);

  const entries = await prisma.creditLedgerEntry.findMany({ where: { runId: run.id }, orderBy: { id: "asc" } });
  expect(entries.map((e) => [e.reason, e.amount])).toEqual([
    ["run_reservation", -1],
    ["run_charge", -7],
  ]);
  await expectBooksBalanced(t.orgId);
});

it("refunds a failed run: credits_used 0 and the balance unchanged", async () => {
  const t = await createTenant(prisma, { credits: 5 });
  const failed = await runOf(t, "[error:500]");
  expect(failed.body).toMatchObject({ status: "failed", credits_used: 0 });
  expect(await balanceOf(t.orgId)).toBe(5);
  const entries = await prisma.creditLedgerEntry.findMany({ where: { runId: failed.body.run_id }, orderBy: { id: "asc" } });
  expect(entries.map((e) => [e.reason, e.amount])).toEqual([
    ["run_reservation", -1],
    ["run_refund", 1],
  ]);
  const task = await prisma.task.findUniqueOrThrow({ where: { id: failed.body.task_id } });
  expect(task.creditsUsed).toBe(0);
  await expectBooksBalanced(t.orgId);
});

it("ends a run at its agent's step limit before running tools no model call could read, and charges what it used", async () => {
  const t = await createTenant(prisma, { credits: 20, maxSteps: 1 });
  const sse = await readSse(`${stack.gatewayUrl}/api/run`, { headers: t.headers, body: { query: '[usage:2500] [call:calc_evaluate {"expression":"1+1"}]', stream: true } });
  const events = sse.events.map((e) => e.data);
  expect(events.map((e) => e.type)).toEqual(["run_started", "run_failed"]);
  expect(events[1]).toMatchObject({ error: { code: "max_steps_exceeded" } });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: events[0].run_id } });
  // One model call (2500 tokens), no tool call: 1 + 0 + ceil(2500 / 1000).
  expect(run).toMatchObject({ status: "failed", errorCode: "max_steps_exceeded", toolCallCount: 0, creditsUsed: 4 });
  expect(await balanceOf(t.orgId)).toBe(16);
  const messages = await prisma.message.findMany({ where: { runId: run.id } });
  expect(messages.filter((m) => m.role === "tool")).toEqual([]);
  await expectBooksBalanced(t.orgId);
});

it("bills a model that reports no usage by an estimate of four characters per token", async () => {
  const t = await createTenant(prisma, { credits: 100 });
  // 4,000 characters of answer and no usage chunk: at least 1,000 estimated tokens.
  const query = `[no-usage] ${"y".repeat(4000)}`;
  const res = await runOf(t, query);
  expect(res.body.status).toBe("completed");
  const run = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id } });
  expect(run.completionTokens).toBe(Math.ceil(run.output.length / 4));
  expect(run.promptTokens).toBeGreaterThanOrEqual(Math.ceil(query.length / 4));
  expect(run.creditsUsed).toBe(1 + Math.ceil((run.promptTokens + run.completionTokens) / 1000));
  expect(res.body.credits_used).toBe(run.creditsUsed);
  expect(run.creditsUsed).toBeGreaterThanOrEqual(3);
  await expectBooksBalanced(t.orgId);
});

it("charges a run cancelled after the model accepted its call, before the first chunk, for the prompt it was sent", async () => {
  const t = await createTenant(prisma, { credits: 100 });
  // The scripted model sends its headers at once, then waits 2 s before each chunk.
  const query = `[sleep:2000] ${"z".repeat(30_000 - "[sleep:2000] ".length)}`;
  const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: t.headers });
  await w.waitFor((e) => e.type === "run_started");
  const { run_id, task_id } = w.events[0];
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: run_id } })).status === "running");
  // Time for the model call to go out and be accepted, well before the first chunk.
  await new Promise((r) => setTimeout(r, 500));
  const cancel = await fetch(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/cancel`, { method: "POST", headers: t.headers });
  expect(cancel.status).toBe(202);
  expect((await w.result).events.map((e) => e.data.type)).toEqual(["run_started", "run_cancelled"]);

  const run = await prisma.run.findUniqueOrThrow({ where: { id: run_id } });
  expect(run).toMatchObject({ status: "cancelled", output: "", completionTokens: 0 });
  // The prompt is the query alone (no instructions, no memories): 7,500 tokens at four characters each.
  expect(run.promptTokens).toBe(Math.ceil(query.length / 4));
  expect(run.creditsUsed).toBe(1 + Math.ceil(7500 / 1000));
  expect(await balanceOf(t.orgId)).toBe(100 - 9);
  await expectBooksBalanced(t.orgId);
});

it("reserves the agent's own base price: concurrent runs cannot spend more than the balance covers", async () => {
  const pricing = { base: 10, per_tool_call: 1, per_1k_tokens: 1 };
  const poor = await createTenant(prisma, { credits: 5, pricing });
  const refused = await runOf(poor, "hi");
  expect(refused.status).toBe(402);
  expect(refused.body.error).toEqual({ code: "insufficient_credits", message: "The organization's credit balance is below this agent's base price of 10 credits." });
  expect(await balanceOf(poor.orgId)).toBe(5);

  const t = await createTenant(prisma, { credits: 25, pricing });
  // Slow enough that every reservation is made before the first run settles its cost.
  const results = await Promise.all(Array.from({ length: 5 }, (_, i) => runOf(t, `[sleep:200] y${i}`)));
  const accepted = results.filter((r) => r.status === 200);
  expect(accepted).toHaveLength(2);
  expect(results.filter((r) => r.status === 402)).toHaveLength(3);
  for (const r of accepted) expect(r.body).toMatchObject({ status: "completed", credits_used: 11 });
  const { ledger, balance } = await expectBooksBalanced(t.orgId);
  expect(ledger.filter((e) => e.reason === "run_reservation").map((e) => e.amount)).toEqual([-10, -10]);
  expect(balance).toBe(25 - 22);
});

it("reserves a credit for an agent with base price 0 that charges for tokens: concurrent runs cannot all start on one credit", async () => {
  const t = await createTenant(prisma, { credits: 1, pricing: { base: 0, per_tool_call: 0, per_1k_tokens: 1 } });
  const results = await Promise.all(Array.from({ length: 6 }, (_, i) => runOf(t, `[sleep:300] z${i}`)));
  const accepted = results.filter((r) => r.status === 200);
  expect(accepted).toHaveLength(1);
  expect(results.filter((r) => r.status === 402)).toHaveLength(5);
  expect(accepted[0]!.body).toMatchObject({ status: "completed", credits_used: 1 });
  const { ledger, balance } = await expectBooksBalanced(t.orgId);
  expect(ledger.filter((e) => e.reason === "run_reservation").map((e) => e.amount)).toEqual([-1]);
  expect(balance).toBe(0);

  // A run that cost nothing gets its reserved credit back; an agent that charges nothing reserves none.
  const free = await createTenant(prisma, { credits: 1, pricing: { base: 0, per_tool_call: 0, per_1k_tokens: 0 } });
  const both = await Promise.all([runOf(free, "[sleep:300] a"), runOf(free, "[sleep:300] b")]);
  expect(both.map((r) => r.status)).toEqual([200, 200]);
  expect(await balanceOf(free.orgId)).toBe(1);
  await expectBooksBalanced(free.orgId);
});

it("charges only the tool calls whose tool ran: not unknown or disabled tools, nor arguments the tool refused", async () => {
  const t = await createTenant(prisma, { credits: 100, tools: ["calc", "clock"] });
  const res = await runOf(
    t,
    '[usage:2500] [call:weather_get {}] [call:http_get {"url":"http://example.com/"}] [call:calc_evaluate {"expression":5}] [call:calc_evaluate {"expression":"2+"}] [call:clock_now {}]',
  );
  expect(res.body.status).toBe("completed");
  expect(res.body.tool_calls.map((c: { result: { error?: { code: string } } }) => c.result.error?.code ?? "ok")).toEqual([
    "unknown_tool",
    "unknown_tool",
    "invalid_arguments",
    "invalid_expression",
    "ok",
  ]);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id } });
  // Every call the model made is on the run; the calculation that failed and the clock ran.
  expect(run.toolCallCount).toBe(5);
  expect(run.promptTokens + run.completionTokens).toBe(5000);
  expect(run.creditsUsed).toBe(1 + 2 + 5);
  expect(res.body.credits_used).toBe(8);
  expect(await balanceOf(t.orgId)).toBe(100 - 8);
  await expectBooksBalanced(t.orgId);
});

// Last: it stops the stack's memory service.
it("does not charge a memory tool call failed by the memory service being down", async () => {
  await stack.memory!.stop();
  const t = await createTenant(prisma, { credits: 100 });
  const res = await runJson(stack.gatewayUrl, t.headers, {
    query: '[usage:2500] [call:memory_save {"content":"Likes green tea"}] [call:calc_evaluate {"expression":"1+1"}]',
    context: { user_id: "u1" },
  });
  expect(res.body.status).toBe("completed");
  expect(res.body.tool_calls.map((c: { result: unknown }) => c.result)).toEqual([
    { error: { code: "unavailable", message: expect.any(String) } },
    { expression: "1+1", result: 2 },
  ]);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id } });
  expect(run.toolCallCount).toBe(2);
  expect(run.creditsUsed).toBe(1 + 1 + 5);
  expect(await balanceOf(t.orgId)).toBe(100 - 7);
  await expectBooksBalanced(t.orgId);
});
