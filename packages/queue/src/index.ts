/** Queue names, job payload schemas, typed enqueue and the one worker factory. */
export { AGENT_RUNS_QUEUE, AGENT_RUN_JOB, agentRunJobSchema, bullPrefix, createRunQueue, enqueueRun, requeueRun, type AgentRunJob } from "./agent-runs.queue";
export { createWorker, type CreateWorkerOptions } from "./create-worker";
export { DelayedError, UnrecoverableError, type Job, type Queue, type Worker } from "bullmq";
