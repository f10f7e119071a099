import { testEnv } from "@agentrun/testing";
import { AGENT_RUNS_QUEUE, bullPrefix, createRunQueue, createWorker, enqueueRun, type Worker } from "@agentrun/queue";
import { createLogger } from "@agentrun/logger";
import { ActiveRuns } from "../runs/active-runs";
import type { RunDeps } from "../runs/run-deps";
import { agentRunProcessor, HAND_BACK_DELAY_MS } from "./agent-run.job";

describe("agentRunProcessor of a worker that cannot use its database", () => {
  const { redisUrl, redisPrefix } = testEnv();
  const prefix = `${redisPrefix}:hand-back-test`;
  const connection = { url: redisUrl };
  const queue = createRunQueue({ connection, redisPrefix: prefix });
  const workers: Worker[] = [];
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.close()));
    await queue.obliterate({ force: true });
    await queue.close();
  });

  it("hands a job it fetched back to the queue, its attempts unused, for another worker to run", async () => {
    const logger = createLogger({ service: "test", level: "silent", pretty: false });
    // The run itself is never reached: the job goes back before anything touches the run's stores.
    const deps = {} as RunDeps;
    const failed: string[] = [];
    const sick = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(prefix), connection, logger, processor: agentRunProcessor(deps, new ActiveRuns(), () => false) });
    sick.on("failed", (job) => failed.push(job!.id!));
    workers.push(sick);
    const handedBack = new Promise<number>((resolve) => sick.once("active", () => resolve(Date.now())));
    await enqueueRun(queue, { runId: "run_hand_back_1" });
    const takenAt = await handedBack;
    const job = await queue.getJob("run_hand_back_1");
    // It waits in the queue (delayed), not failed, with no attempt used up.
    for (let i = 0; i < 50 && (await job!.getState()) === "active"; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await job!.getState()).toBe("delayed");
    await sick.close();

    // Another worker takes it once the delay is over, as its first attempt.
    const attempts: number[] = [];
    const healthy = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(prefix), connection, logger, processor: async (j) => void attempts.push(j.attemptsMade) });
    workers.push(healthy);
    const ran = new Promise<number>((resolve) => healthy.once("completed", () => resolve(Date.now())));
    const ranAt = await ran;
    expect(attempts).toEqual([0]);
    expect(ranAt - takenAt).toBeGreaterThanOrEqual(HAND_BACK_DELAY_MS - 50);
    expect(failed).toEqual([]);
    await healthy.close();
  }, 20_000);

  it("hands a job fetched as its worker closes back at once, its attempts unused, and runs none", async () => {
    const logger = createLogger({ service: "test", level: "silent", pretty: false });
    const deps = {} as RunDeps;
    const active = new ActiveRuns();
    active.close();
    const failed: string[] = [];
    const closing = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(prefix), connection, logger, processor: agentRunProcessor(deps, active) });
    closing.on("failed", (job) => failed.push(job!.id!));
    workers.push(closing);
    // As in a worker's shutdown, BullMQ's worker closes as it hands the job over: it fetches no more.
    let closed: Promise<void> | undefined;
    const handedBack = new Promise<number>((resolve) =>
      closing.once("active", () => {
        closed = closing.close();
        resolve(Date.now());
      }),
    );
    await enqueueRun(queue, { runId: "run_hand_back_2" });
    const takenAt = await handedBack;
    await closed;
    const job = await queue.getJob("run_hand_back_2");
    expect(["delayed", "waiting"]).toContain(await job!.getState());
    expect(active.size).toBe(0);

    const attempts: number[] = [];
    const other = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(prefix), connection, logger, processor: async (j) => void attempts.push(j.attemptsMade) });
    workers.push(other);
    const ranAt = await new Promise<number>((resolve) => other.once("completed", () => resolve(Date.now())));
    expect(attempts).toEqual([0]);
    // Not held back as a sick worker's job is.
    expect(ranAt - takenAt).toBeLessThan(HAND_BACK_DELAY_MS);
    expect(failed).toEqual([]);
  }, 20_000);
});
