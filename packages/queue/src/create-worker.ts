import { Worker, type ConnectionOptions, type Job, type Processor } from "bullmq";
import type { Logger } from "pino";
import { isUnavailableError } from "@agentrun/errors";

export interface CreateWorkerOptions<T> {
  queueName: string;
  prefix: string;
  connection: ConnectionOptions;
  processor: Processor<T>;
  logger: Logger;
  /**
   * Jobs processed at once by this process.
   * @defaultValue 16
   */
  concurrency?: number;
  /**
   * How long a job's lock lasts without renewal; a worker that dies loses its jobs after this.
   * @defaultValue 10000
   */
  lockDurationMs?: number;
  /**
   * How often this worker looks for jobs whose lock expired (stalled jobs).
   * @defaultValue 5000
   */
  stalledIntervalMs?: number;
  /** Called when a job fails for good (all attempts used, or stalled too often). */
  onFinalFailure?: (job: Job<T>, err: Error) => void | Promise<void>;
}

/**
 * BullMQ's errors for a job whose lock this worker no longer holds (lock-manager's renewal, and
 * Scripts.finishedErrors for JobLockNotExist / JobLockMismatch: plain Errors, told apart only by
 * their messages), with the job's id captured.
 */
const LOST_LOCK = /^(?:could not renew lock for job|Missing lock for job|Lock mismatch for job) (.+?)(?:\. |$)/;

/** The job's id when `err` says this worker lost the job's lock, else undefined. */
export function lostLockJobId(err: Error): string | undefined {
  return LOST_LOCK.exec(err.message)?.[1];
}

/** One BullMQ worker with logging, concurrency and stall detection set the same way for every queue. */
export function createWorker<T>(opts: CreateWorkerOptions<T>): Worker<T> {
  const { logger } = opts;
  const worker = new Worker<T>(opts.queueName, opts.processor, {
    connection: opts.connection,
    prefix: opts.prefix,
    concurrency: opts.concurrency ?? 16,
    lockDuration: opts.lockDurationMs ?? 10_000,
    stalledInterval: opts.stalledIntervalMs ?? 5_000,
    maxStalledCount: 1,
  });
  worker.on("error", (err) => {
    const jobId = lostLockJobId(err);
    // Expected when a worker was stopped past its lock (a paused process, a long GC) and another
    // took its job over: not an error an operator should be called for, and its stack says nothing.
    if (jobId !== undefined) logger.warn({ jobId, err: err.message }, "the job's lock lapsed: another worker may have taken the run over; its run state decides the outcome");
    // Redis out of reach: BullMQ reports every reconnection attempt of its connections, several
    // a second for as long as the outage lasts. The watch of the connection (logConnectionState
    // of @agentrun/redis) reports the outage and its end, once each.
    else if (isUnavailableError(err)) logger.debug({ err: err.message }, "queue worker: redis unreachable");
    else logger.error({ err }, "queue worker error");
  });
  worker.on("stalled", (jobId) => logger.warn({ jobId }, "job stalled; it will be retried or failed"));
  worker.on("failed", (job, err) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || /stalled/i.test(err.message);
    logger[final ? "error" : "warn"]({ err, jobId: job.id, attemptsMade: job.attemptsMade }, final ? "job failed" : "job failed; will retry");
    if (final && opts.onFinalFailure) {
      Promise.resolve(opts.onFinalFailure(job, err)).catch((e) => logger.error({ err: e, jobId: job.id }, "final-failure handler failed"));
    }
  });
  return worker;
}
