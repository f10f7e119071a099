import { testEnv } from "@agentrun/testing";
import { Worker } from "bullmq";
import { AGENT_RUNS_QUEUE, bullPrefix, createRunQueue, enqueueRun, requeueRun } from "./agent-runs.queue";

describe("requeueRun", () => {
  const { redisUrl, redisPrefix } = testEnv();
  const prefix = `${redisPrefix}:requeue-test`;
  const connection = { url: redisUrl };
  const queue = createRunQueue({ connection, redisPrefix: prefix });
  let worker: Worker | undefined;
  afterAll(async () => {
    await worker?.close();
    await queue.obliterate({ force: true });
    await queue.close();
  });

  it("gives a run that failed for good all its attempts again", async () => {
    const attempts: number[] = [];
    const deferrals: unknown[] = [];
    let failedTimes = 0;
    worker = new Worker(
      AGENT_RUNS_QUEUE,
      async (job) => {
        attempts.push(job.attemptsMade);
        deferrals.push(job.data.deferrals);
        throw new Error("database down");
      },
      { connection, prefix: bullPrefix(prefix) },
    );
    const failedForGood = () =>
      new Promise<void>((resolve) => {
        const onFailed = async () => {
          if (++failedTimes % 3 === 0) {
            worker!.off("failed", onFailed);
            resolve();
          }
        };
        worker!.on("failed", onFailed);
      });

    let done = failedForGood();
    await enqueueRun(queue, { runId: "run_requeue_1" });
    await done;
    const job = (await queue.getJob("run_requeue_1"))!;
    expect(await job.getState()).toBe("failed");
    // Handed back as often as it may be (the worker's count), as after a long outage.
    await job.updateData({ runId: "run_requeue_1", deferrals: 10 });

    done = failedForGood();
    expect(await requeueRun(queue, "run_requeue_1")).toBe("retried");
    await done;
    // Three attempts each time: the second round did not fail for good at its first error.
    expect(attempts).toEqual([0, 1, 2, 0, 1, 2]);
    // And its hand-backs counted anew.
    expect(deferrals).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
  }, 20_000);
});
