/** How a run ends: the one path that moves a run to its final state, used by worker and gateway. */
export { endAbandonedRun, failRun, finishRun, type FinalStatus, type FinishRunDeps, type FinishRunInput, type FinishRunUsage } from "./finish-run";
export type { MessageRecord } from "./run-record";
export { withRetry } from "./with-retry";
