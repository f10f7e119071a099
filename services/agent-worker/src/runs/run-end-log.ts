import { finalStatusOf, type RunEvent } from "@agentrun/contracts";
import type { Logger } from "@agentrun/logger";
import type { FinishRunUsage } from "@agentrun/run-state";

/**
 * The one info line of a run this worker ended (`log` carries its id and its request's): how it
 * ended and what it went through. The run's only line at the usual level when it went well, so
 * that a run can be followed from the gateway's access line to its end.
 */
export function logRunEnd(log: Logger, terminal: RunEvent, run: { taskId: string; durationMs: number; usage: FinishRunUsage }): void {
  const status = finalStatusOf(terminal) ?? terminal.type;
  log.info(
    {
      taskId: run.taskId,
      status,
      code: terminal.type === "run_failed" ? terminal.error.code : undefined,
      // Counted from the run's first claim, as its time limit is: a restarted run's includes its first worker's time.
      durationMs: Math.round(run.durationMs),
      modelCalls: run.usage.modelCalls,
      toolCalls: run.usage.toolCalls,
      creditsUsed: terminal.type === "run_completed" ? terminal.credits_used : undefined,
    },
    "run ended",
  );
}
