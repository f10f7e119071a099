import { createTestRun, testEnv, testStores } from "@agentrun/testing";
import { finishRun, type FinishRunInput } from "./finish-run";

// What a run's end charges, by how it ended and whether it reached the model: a completed run
// pays its price; a failed run nothing, except one stopped by a limit its own work ran into,
// which, like a cancelled run, pays for what it consumed (and nothing when that was nothing).
const stores = testStores();
const deps = () => ({ prisma: stores.prisma, redis: stores.redis, redisPrefix: `${testEnv().redisPrefix}:charges` });
const PRICING = { base: 3, per_tool_call: 2, per_1k_tokens: 5 };

async function chargeOf(end: Pick<FinishRunInput, "status" | "error">, modelCalls: number): Promise<number> {
  const runId = await createTestRun(stores.prisma, "running");
  const usage = { promptTokens: modelCalls * 1500, completionTokens: 0, toolCalls: 0, chargedToolCalls: 0, modelCalls };
  const terminal = await finishRun(deps(), { runId, ...end, output: "", usage, pricing: PRICING, messages: [] });
  expect(terminal).not.toBeNull();
  return (await stores.prisma.run.findUniqueOrThrow({ where: { id: runId } })).creditsUsed;
}

const failed = (code: string) => ({ status: "failed" as const, error: { code, message: code } });

it.each([
  ["completed", { status: "completed" as const }, 1, 3 + 10],
  ["cancelled after a model call", { status: "cancelled" as const }, 1, 3 + 10],
  ["cancelled before any model call", { status: "cancelled" as const }, 0, 0],
  ["run_timeout after a model call", failed("run_timeout"), 1, 3 + 10],
  ["run_timeout before any model call", failed("run_timeout"), 0, 0],
  ["max_steps_exceeded", failed("max_steps_exceeded"), 2, 3 + 15],
  ["model_error after a model call", failed("model_error"), 1, 0],
])("%s costs what it should", async (_name, end, modelCalls, expected) => {
  expect(await chargeOf(end, modelCalls)).toBe(expected);
});
