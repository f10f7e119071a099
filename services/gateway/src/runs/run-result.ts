import type { PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import { toRunView, toToolCalls } from "../views/run.view";

/** The `stream: false` answer: the Run object plus its tool calls. */
export async function loadRunResult(prisma: PrismaClient, runId: string) {
  const run = await prisma.run.findUnique({
    where: { id: runId },
    include: { messages: { where: { role: "tool" }, orderBy: { createdAt: "asc" }, select: { role: true, tool: true, action: true, params: true, result: true } } },
  });
  if (!run) throw new AppError("run_not_found");
  return { ...toRunView(run), tool_calls: toToolCalls(run.messages) };
}
