import type { PrismaClient } from "@agentrun/db";
import { toRunView, toToolCalls } from "../views/run.view";

/** The `stream: false` answer: the Run object plus its tool calls; null when the run is gone (its task deleted). */
export async function loadRunResult(prisma: PrismaClient, runId: string) {
  const run = await prisma.run.findUnique({
    where: { id: runId },
    include: { messages: { where: { role: "tool" }, orderBy: { createdAt: "asc" }, select: { role: true, tool: true, action: true, params: true, result: true } } },
  });
  if (!run) return null;
  return { ...toRunView(run), tool_calls: toToolCalls(run.messages) };
}
