import { createTestRun, testEnv, testStores } from "@agentrun/testing";
import { MAX_RUN_COST } from "@agentrun/credits";
import { finishRun } from "./finish-run";

// A run's end against totals at the edge of PostgreSQL's integer range (concurrent runs at
// extreme prices take an organization's balance, or a task's spending, that far): the run still
// ends as it should, and the ledger records what the balance moved.
const stores = testStores();
const deps = () => ({ prisma: stores.prisma, redis: stores.redis, redisPrefix: `${testEnv().redisPrefix}:totals` });
const INT_MAX = 2_147_483_647;

/** A running run whose organization has `balance` and whose task has spent `taskSpent`; ended completed at the highest cost one run can have. */
async function endAtMaxCost(balance: number, taskSpent: number) {
  const runId = await createTestRun(stores.prisma, "running");
  const run = await stores.prisma.run.findUniqueOrThrow({ where: { id: runId } });
  await stores.prisma.organization.update({ where: { id: run.orgId }, data: { creditBalance: balance } });
  await stores.prisma.task.update({ where: { id: run.taskId }, data: { creditsUsed: taskSpent } });
  const usage = { promptTokens: 1_000_000_000, completionTokens: 0, toolCalls: 0, chargedToolCalls: 0, modelCalls: 1 };
  const terminal = await finishRun(deps(), { runId, status: "completed", output: "done", usage, pricing: { per_1k_tokens: 1_000_000 }, messages: [] });
  const org = await stores.prisma.organization.findUniqueOrThrow({ where: { id: run.orgId } });
  const task = await stores.prisma.task.findUniqueOrThrow({ where: { id: run.taskId } });
  const ledger = await stores.prisma.creditLedgerEntry.findMany({ where: { runId } });
  const ended = await stores.prisma.run.findUniqueOrThrow({ where: { id: runId } });
  return { terminal, org, task, ledger, ended };
}

it("charges a run in full while the balance stays inside its range", async () => {
  const { terminal, org, task, ledger, ended } = await endAtMaxCost(-1_000_000_000, 5);
  expect(terminal).toMatchObject({ type: "run_completed", credits_used: MAX_RUN_COST });
  expect(ended).toMatchObject({ status: "completed", output: "done", creditsUsed: MAX_RUN_COST });
  expect(org.creditBalance).toBe(-2_000_000_000);
  expect(task.creditsUsed).toBe(MAX_RUN_COST + 5);
  expect(ledger.map((l) => [l.amount, l.balanceAfter])).toEqual([[-MAX_RUN_COST, -2_000_000_000]]);
});

it("ends a run whose charge would take the balance and the task's spending past the integer range: both stop at its edge", async () => {
  const { terminal, org, task, ledger, ended } = await endAtMaxCost(-2_000_000_000, INT_MAX - 10);
  expect(terminal).toMatchObject({ type: "run_completed", credits_used: MAX_RUN_COST });
  expect(ended).toMatchObject({ status: "completed", output: "done", creditsUsed: MAX_RUN_COST });
  expect(org.creditBalance).toBe(-INT_MAX);
  expect(task.creditsUsed).toBe(INT_MAX);
  // The ledger says what the balance moved, so that its amounts still add up to the balance.
  expect(ledger.map((l) => [l.amount, l.balanceAfter])).toEqual([[-(INT_MAX - 2_000_000_000), -INT_MAX]]);
});
