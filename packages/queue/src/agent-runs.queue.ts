import { Queue, type ConnectionOptions } from "bullmq";
import { z } from "zod";

/** Queue of runs to execute. Jobs carry only ids (the run's, its request's): PostgreSQL owns the run's input and state. */
export const AGENT_RUNS_QUEUE = "agent-runs";
export const AGENT_RUN_JOB = "agent-run.execute";

export const agentRunJobSchema = z.object({
  runId: z.string().min(1),
  /**
   * The id of the gateway request that started the run, for the worker's log lines about it (at
   * most 200 characters, as the gateway takes an X-Request-Id). Not limited here: a log field
   * never fails a run's job.
   */
  requestId: z.string().optional(),
  /** How often the job was handed back because its run could not start for an outage (see the worker's agentRunProcessor). */
  deferrals: z.number().int().nonnegative().optional(),
});
export type AgentRunJob = z.infer<typeof agentRunJobSchema>;

/** BullMQ keys live under the deployment's Redis prefix. */
export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;

export interface CreateRunQueueOptions {
  connection: ConnectionOptions;
  redisPrefix: string;
}

export function createRunQueue({ connection, redisPrefix }: CreateRunQueueOptions): Queue<AgentRunJob> {
  return new Queue<AgentRunJob>(AGENT_RUNS_QUEUE, { connection, prefix: bullPrefix(redisPrefix) });
}

/**
 * Enqueues a run. `jobId = runId`, so enqueueing the same run twice collapses into one job.
 * Infrastructure failures are retried with back-off; the run's own failures (model errors and
 * the like) end the run and never reach BullMQ.
 */
export async function enqueueRun(queue: Queue<AgentRunJob>, job: AgentRunJob, { timeoutMs = 2000 }: { timeoutMs?: number } = {}): Promise<void> {
  const data = agentRunJobSchema.parse(job);
  // BullMQ's connection waits for Redis indefinitely; a caller must learn of an outage quickly.
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`enqueue timed out after ${timeoutMs} ms: Redis unreachable`)), timeoutMs);
  });
  try {
    await Promise.race([addJob(queue, data), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Puts a run back on the queue when its job was lost or failed for good (e.g. PostgreSQL was
 * down for all attempts). Returns what it did.
 */
export async function requeueRun(queue: Queue<AgentRunJob>, runId: string): Promise<"added" | "retried" | "pending"> {
  const job = await queue.getJob(runId);
  if (!job) {
    await addJob(queue, { runId });
    return "added";
  }
  const state = await job.getState();
  if (state === "failed") {
    // With the counts of attempts cleared, and of its hand-backs (data beyond the run's id): the
    // job gets all its attempts again, rather than failing for good at its first error.
    await job.updateData({ runId });
    await job.retry("failed", { resetAttemptsMade: true, resetAttemptsStarted: true });
    return "retried";
  }
  if (state === "completed") {
    await job.remove();
    await addJob(queue, { runId });
    return "added";
  }
  return "pending";
}

function addJob(queue: Queue<AgentRunJob>, data: AgentRunJob) {
  return queue.add(AGENT_RUN_JOB, data, {
    jobId: data.runId,
    attempts: 3,
    backoff: { type: "exponential", delay: 500 },
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 24 * 3600 },
  });
}
