import { agentRunJobSchema, type Job } from "@agentrun/queue";
import { executeRun } from "../runs/execute-run";
import type { RunDeps } from "../runs/run-deps";
import type { ActiveRuns } from "../runs/active-runs";

/** Processor of `agent-run.execute`: validates the payload and executes the run under a stop signal. */
export function agentRunProcessor(deps: RunDeps, active: ActiveRuns) {
  return async (job: Job): Promise<void> => {
    const { runId } = agentRunJobSchema.parse(job.data);
    await active.execute(runId, (control) => executeRun(deps, runId, control));
  };
}
