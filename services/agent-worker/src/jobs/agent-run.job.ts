import { agentRunJobSchema, DelayedError, type Job } from "@agentrun/queue";
import { executeRun } from "../runs/execute-run";
import type { RunDeps } from "../runs/run-deps";
import type { ActiveRuns } from "../runs/active-runs";

/** How long a job handed back by a worker that cannot use its database waits before another worker may take it. */
export const HAND_BACK_DELAY_MS = 1000;

/**
 * Processor of `agent-run.execute`: validates the payload and executes the run under a stop
 * signal. A worker that cannot use its database (`databaseUsable`; it stops fetching, see
 * startAgentWorker, but may have fetched one more job as it did) hands the job back to the queue
 * without using up one of its attempts, rather than failing it.
 */
export function agentRunProcessor(deps: RunDeps, active: ActiveRuns, databaseUsable: () => boolean = () => true) {
  return async (job: Job, token?: string): Promise<void> => {
    const { runId } = agentRunJobSchema.parse(job.data);
    if (!databaseUsable() && token) {
      await job.moveToDelayed(Date.now() + HAND_BACK_DELAY_MS, token);
      throw new DelayedError();
    }
    await active.execute(runId, (control) => executeRun(deps, runId, control));
  };
}
