import { type PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { readDbEvents, RUN_LOG_TTL_LIVE_S, runCancelKey, RunEventWriter, runLogKey, runWriterKey } from "@agentrun/events";
import { createTestRun, testEnv, testStores } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { endAbandonedRun, failRun } from "./finish-run";
import { UNFINISHED_TOOL } from "./open-tool-calls";

// A run ended by someone else than its worker (the sweeper, a worker taking its job over, the
// gateway's cancel) while that worker, now gone, was running a tool: the call gets its result.
let prisma: PrismaClient;
let redis: Redis;
const redisPrefix = `${testEnv().redisPrefix}:open-tools`;
testStores({}, (s) => ({ prisma, redis } = s));
const deps = () => ({ prisma, redis, redisPrefix });

/** A running run of worker w1 that finished one tool call, started another, and was killed. */
async function runKilledInToolCall(): Promise<string> {
  const runId = await createTestRun(prisma, "running");
  await prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  await redis.set(runWriterKey(redisPrefix, runId), "w1", "EX", RUN_LOG_TTL_LIVE_S);
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
  writer.emit({ type: "tool_call", tool: "clock", action: "now", params: {}, call_id: "call_1" });
  writer.emit({ type: "tool_result", tool: "clock", action: "now", result: { iso: "2026-11-28T00:00:00Z" }, call_id: "call_1" });
  writer.emit({ type: "text_chunk", content: "Let me look that up." });
  writer.emit({ type: "tool_call", tool: "http", action: "get", params: { url: "https://example.com" }, call_id: "call_2" });
  await writer.flush();
  // Its log append answered too; then nothing more from it.
  for (let i = 0; i < 50 && (await redis.llen(runLogKey(redisPrefix, runId))) < 4; i++) await new Promise((r) => setTimeout(r, 20));
  return runId;
}

const logEvents = async (runId: string) => (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).flatMap((json) => [JSON.parse(json)].flat() as RunEvent[]);
const shape = (events: RunEvent[]) => events.map((e) => [e.seq, e.type, "call_id" in e ? e.call_id : undefined]);

it.each([
  ["failed as worker_lost", false, "run_failed"],
  ["cancelled (its cancel reached no live worker)", true, "run_cancelled"],
])("gives the open tool call its result before the end of a run %s", async (_name, cancelled, terminalType) => {
  const runId = await runKilledInToolCall();
  if (cancelled) await redis.set(runCancelKey(redisPrefix, runId), "1", "EX", 60);
  expect(await endAbandonedRun(deps(), { id: runId, query: "q" }, { code: "worker_lost", message: "gone" })).toBe(true);

  const expected = [
    [1, "run_started", undefined],
    [2, "tool_call", "call_1"],
    [3, "tool_result", "call_1"],
    [4, "text_chunk", undefined],
    [5, "tool_call", "call_2"],
    [6, "tool_result", "call_2"],
    [7, terminalType, undefined],
  ];
  const stored = await readDbEvents({ prisma }, runId);
  expect(shape(stored)).toEqual(expected);
  expect(stored[5]).toMatchObject({ tool: "http", action: "get", result: { error: UNFINISHED_TOOL } });
  // Followers get it too, in the run's log, before the end.
  expect(shape(await logEvents(runId))).toEqual(expected.slice(1));
  // Its messages and tool calls are what its events show, as its worker would have recorded them.
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ toolCallCount: 2, output: "", creditsUsed: 0 });
  const messages = await prisma.message.findMany({ where: { runId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  expect(messages.map((m) => [m.role, m.tool, m.toolCallId, m.content])).toEqual([
    ["user", null, null, "q"],
    ["tool", "clock", "call_1", '{"iso":"2026-11-28T00:00:00Z"}'],
    ["assistant", null, null, "Let me look that up."],
    ["tool", "http", "call_2", JSON.stringify({ error: UNFINISHED_TOOL })],
  ]);
  expect(messages[3]).toMatchObject({ action: "get", params: { url: "https://example.com" }, result: { error: UNFINISHED_TOOL } });
});

it("adds nothing to a run whose tool calls all had their results", async () => {
  const runId = await createTestRun(prisma, "running");
  await prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
  writer.emit({ type: "tool_call", tool: "clock", action: "now", params: {}, call_id: "call_1" });
  writer.emit({ type: "tool_result", tool: "clock", action: "now", result: { iso: "2026-11-28T00:00:00Z" }, call_id: "call_1" });
  await writer.flush();
  expect(await failRun(deps(), { id: runId, query: "q" }, { code: "worker_lost", message: "gone" })).toBe(true);
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "run_failed"]);
});
