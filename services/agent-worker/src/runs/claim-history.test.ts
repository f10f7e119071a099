import { newId, type PrismaClient } from "@agentrun/db";
import { createTestRun, testStores } from "@agentrun/testing";
import { recentHistory, type HistoryMessage } from "./prompt";

// The history a claim reads (agentrun_claim_run, and agentrun_task_history for a take-over): at
// most HISTORY_MAX_MESSAGES, and nothing that the worker's cut to HISTORY_MAX_CHARS would drop
// for its size alone, so that huge earlier answers are not read only to be dropped.
let prisma: PrismaClient;
testStores({}, (s) => (prisma = s.prisma));

const MAX_CHARS = 100_000;

/** A queued run whose task already holds `texts` as alternating user and assistant messages, oldest first. */
async function runAfter(texts: string[]): Promise<{ runId: string; taskId: string; history: HistoryMessage[] }> {
  const runId = await createTestRun(prisma, "queued");
  const { taskId } = await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { taskId: true } });
  const history = texts.map((content, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content }) as HistoryMessage);
  const t0 = Date.now() - 60_000;
  await prisma.message.createMany({
    data: history.map((m, i) => ({ id: newId("msg"), taskId, role: m.role, content: m.content, createdAt: new Date(t0 + i * 1000) })),
  });
  return { runId, taskId, history };
}

async function claimedHistory(runId: string, maxChars: number | null): Promise<HistoryMessage[]> {
  const [row] = await prisma.$queryRaw<{ history: HistoryMessage[] }[]>`SELECT history FROM agentrun_claim_run(${runId}, ${"worker-1"}, ${50}::integer, ${maxChars}::integer)`;
  return row!.history;
}

describe("a claim's history", () => {
  it("leaves out, in PostgreSQL, older messages that could not fit in HISTORY_MAX_CHARS", async () => {
    const { runId, taskId, history } = await runAfter(Array.from({ length: 10 }, (_, i) => `${i}`.repeat(60_000)));
    const claimed = await claimedHistory(runId, MAX_CHARS);
    // At most four times the characters, in bytes: six of 60,000 (the newest), not all ten.
    expect(claimed).toEqual(history.slice(-6));
    // What the worker keeps of it is what it would keep of the whole history.
    expect(recentHistory(claimed, MAX_CHARS)).toEqual(recentHistory(history, MAX_CHARS));
    // A take-over reads it the same way.
    const [row] = await prisma.$queryRaw<{ history: HistoryMessage[] }[]>`SELECT agentrun_task_history(${taskId}, ${runId}, ${50}::integer, ${MAX_CHARS}::integer) AS history`;
    expect(row!.history).toEqual(history.slice(-6));
  });

  it("keeps every message the worker's cut keeps, in characters that take three bytes", async () => {
    // 45,000 characters of 3 bytes each: two fit in 100,000 characters, though they take 270,000 bytes.
    const { runId, history } = await runAfter(["question ".repeat(10), "\u4e2d".repeat(45_000), "\u6587".repeat(45_000), "\u5b57".repeat(45_000)]);
    const claimed = await claimedHistory(runId, MAX_CHARS);
    expect(recentHistory(claimed, MAX_CHARS)).toEqual(recentHistory(history, MAX_CHARS));
    expect(recentHistory(claimed, MAX_CHARS).map((m) => m.content.length)).toEqual([45_000, 45_000]);
  });

  it("is bounded by count alone without a size (as the previous release calls it)", async () => {
    const { runId, history } = await runAfter(Array.from({ length: 4 }, (_, i) => `${i}`.repeat(200_000)));
    expect(await claimedHistory(runId, null)).toEqual(history);
    // (An unknown run claims nothing: the three-argument call is still understood.)
    expect(await prisma.$queryRaw`SELECT * FROM agentrun_claim_run(${newId("run")}, ${"w"}, ${50}::integer)`).toEqual([]);
  });
});
