import { capturedLogger, eventually, testEnv } from "@agentrun/testing";
import { Queue, type Job, type Worker } from "bullmq";
import IORedis from "ioredis";
import { createWorker, lostLockJobId } from "./create-worker";

describe("createWorker's logging of a job whose lock this worker lost", () => {
  const { redisUrl, redisPrefix } = testEnv();
  const prefix = `${redisPrefix}:lock-lost-test`;
  const queueName = "lock-lost";
  const connection = { url: redisUrl };
  const queue = new Queue(queueName, { connection, prefix });
  const redis = new IORedis(redisUrl);
  const { lines, logger } = capturedLogger("debug");
  const lockKey = (job: Job) => `${prefix}:${queueName}:${job.id}:lock`;
  let worker: Worker | undefined;
  afterAll(async () => {
    await worker?.close();
    await queue.obliterate({ force: true });
    await queue.close();
    redis.disconnect();
  });

  it("logs them at warn without the stack, and other errors still at error", async () => {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    worker = createWorker({
      queueName,
      prefix,
      connection,
      logger,
      // The lock is renewed every 500 ms; no stall check in the test's time, which would hand the jobs out again.
      lockDurationMs: 1000,
      stalledIntervalMs: 60_000,
      processor: async (job, token) => {
        if (job.attemptsMade > 0) return;
        switch (job.name) {
          case "taken-over":
            // Another worker took the job over: the lock holds its token. Renewal fails, then completing does.
            await redis.set(lockKey(job), "another-worker", "PX", 60_000);
            await sleep(1200);
            return;
          case "lapsed":
            await redis.del(lockKey(job));
            return;
          case "handed-back":
            // As the agent-run processor hands a job back: moveToDelayed with its token, which fails;
            // the attempt's failure is then moved to delayed (a retry with back-off), which fails too.
            await redis.set(lockKey(job), "another-worker", "PX", 60_000);
            await job.moveToDelayed(Date.now() + 1000, token);
            return;
          case "removed":
            // Not about a lock: the job itself is gone (BullMQ's "Missing key for job"), which stays an error.
            await redis.del(`${prefix}:${queueName}:${job.id}`);
            return;
          default:
            throw new Error("processor broke");
        }
      },
    });
    await queue.add("taken-over", {}, { jobId: "run_taken.over" });
    await queue.add("lapsed", {}, { jobId: "run_lapsed" });
    await queue.add("handed-back", {}, { jobId: "run_handed_back", attempts: 2, backoff: { type: "fixed", delay: 60_000 } });
    await queue.add("removed", {}, { jobId: "run_removed" });
    await queue.add("broken", {}, { jobId: "run_broken" });

    const jobOfMessage: Record<string, string> = {
      "could not renew lock for job run_taken.over": "run_taken.over",
      "Lock mismatch for job run_taken.over. Cmd moveToFinished from active": "run_taken.over",
      "Missing lock for job run_lapsed. moveToFinished": "run_lapsed",
      "Lock mismatch for job run_handed_back. Cmd moveToDelayed from active": "run_handed_back",
    };
    const messages = Object.keys(jobOfMessage);
    const lineOf = (message: string) => lines.find((l) => l.err === message || l.err?.message === message);
    const missingKey = "Missing key for job run_removed. moveToFinished";
    await eventually(async () => messages.every(lineOf) && lineOf(missingKey) && lines.some((l) => l.msg === "job failed"));
    for (const message of messages) {
      expect(lineOf(message)).toMatchObject({
        level: 40,
        jobId: jobOfMessage[message],
        // The message alone: BullMQ's stack says nothing about the run.
        err: message,
        msg: "the job's lock lapsed: another worker may have taken the run over; its run state decides the outcome",
      });
    }
    expect(lines.filter((l) => l.level >= 50 && /lock/i.test(JSON.stringify(l)))).toEqual([]);
    // Other errors are still errors, with their stacks: a worker error not about a lock, and a processor's own.
    expect(lineOf(missingKey)).toMatchObject({ level: 50, msg: "queue worker error", err: { stack: expect.stringContaining(missingKey) } });
    expect(lines.find((l) => l.msg === "job failed")).toMatchObject({ level: 50, jobId: "run_broken", err: { message: "processor broke" } });
  }, 20_000);

  it("reads the job's id out of BullMQ's messages for a lost lock, and only those", () => {
    expect(lostLockJobId(new Error("could not renew lock for job run_a.b"))).toBe("run_a.b");
    expect(lostLockJobId(new Error("Missing lock for job run_1. moveToFinished"))).toBe("run_1");
    expect(lostLockJobId(new Error("Lock mismatch for job run_1. Cmd moveToDelayed from active"))).toBe("run_1");
    expect(lostLockJobId(new Error("Missing key for job run_1. moveToFinished"))).toBeUndefined();
    expect(lostLockJobId(new Error("connect ECONNREFUSED 127.0.0.1:6379"))).toBeUndefined();
    expect(lostLockJobId(new Error("model said: Lock mismatch for job run_1. Cmd x"))).toBeUndefined();
  });
});
