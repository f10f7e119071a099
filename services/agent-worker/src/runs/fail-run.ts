import { finishRun } from "@agentrun/run-state";
import type { RunDeps } from "./run-deps";

/** The error of a run whose worker stopped while executing it. */
export const WORKER_LOST = { code: "worker_lost", message: "The worker executing the run stopped." } as const;

/** Ends a run nobody executes as failed, keeping its query in the task's history; false if it had ended already. */
export async function failRun(deps: Pick<RunDeps, "prisma" | "redis" | "redisPrefix">, run: { id: string; query: string }, error: { code: string; message: string }): Promise<boolean> {
  const { prisma, redis, redisPrefix } = deps;
  const terminal = await finishRun({ prisma, redis, redisPrefix }, { runId: run.id, status: "failed", error, messages: [{ role: "user", content: run.query }] });
  return terminal !== null;
}
