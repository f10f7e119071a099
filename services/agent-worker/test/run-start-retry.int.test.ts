import type Redis from "ioredis";
import { loseClaim, stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { Agent, PrismaClient } from "@agentrun/db";
import { runHeartbeatKey, runLogKey, runWriterKey } from "@agentrun/events";
import { createLogger } from "@agentrun/logger";
import { createMemoryClient } from "@agentrun/memory-client";
import { workerConfigSchema } from "../src/config";
import { AgentCache } from "../src/runs/agent-cache";
import { executeRun } from "../src/runs/execute-run";
import { ModelClients } from "../src/runs/model-clients";
import { ReconnectBeats } from "../src/runs/reconnect-beats";
import type { RunDeps } from "../src/runs/run-deps";
import { ToolRegistry } from "../src/tools/registry";
import { AGENT_RUNS_QUEUE, bullPrefix, createRunQueue, createWorker } from "@agentrun/queue";
import { ActiveRuns } from "../src/runs/active-runs";
import { agentRunProcessor, MAX_START_DEFERRALS } from "../src/jobs/agent-run.job";

// The worker's run execution in this process against the real stack (no worker process: runs
// stay queued until the test executes them), with PostgreSQL lost for one read of the agent.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let redis: Redis;

stackWithTenant((started) => ({ stack, prisma, tenant, redis } = started as typeof started & { redis: Redis }), { stack: { workers: 0, memory: false }, redis: true });

/** Agents read from PostgreSQL, except the first read, which fails as a lost connection does. */
class AgentsLosingOneRead extends AgentCache {
  failures = 1;
  override get(agentId: string): Promise<Agent> {
    if (this.failures-- > 0) return Promise.reject(new Error("Connection terminated unexpectedly"));
    return super.get(agentId);
  }
}

function workerDeps(workerId = "worker-in-test", agents: AgentCache = new AgentsLosingOneRead(prisma)): RunDeps {
  const config = workerConfigSchema.parse({ ...stack.env, WORKER_ID: workerId });
  return {
    config,
    logger: createLogger({ service: "run-start-retry-test", level: "silent" }),
    prisma,
    redis,
    redisPrefix: config.REDIS_PREFIX,
    models: new ModelClients(config),
    agents,
    tools: new ToolRegistry({ timeoutMs: 1000, maxBytes: 1000, allowPrivate: false }),
    memory: createMemoryClient({ baseUrl: config.MEMORY_URL, token: config.INTERNAL_TOKEN, timeoutMs: 500 }),
    workerId,
    heartbeatTtlMs: 600,
    reconnectBeats: new ReconnectBeats(redis),
  };
}

it("a run whose start meets PostgreSQL out of reach is tried again, not failed, and then answers", async () => {
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "after a lost connection" }, headers: tenant.headers, timeoutMs: 30_000 });
  await live.waitFor((e) => e.type === "run_started");
  const runId: string = live.events[0].run_id;
  const deps = workerDeps();
  const control = () => ({ signal: new AbortController().signal, stop: () => {}, closing: new AbortController().signal });

  // The first attempt throws (BullMQ would try the job again): the run is not ended.
  await expect(executeRun(deps, runId, control())).rejects.toThrow("Connection terminated");
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", errorCode: null });
  expect(await redis.exists(runHeartbeatKey(deps.redisPrefix, runId))).toBe(0);

  // The next attempt takes the run over and restarts it.
  await executeRun(deps, runId, control());
  const events = (await live.result).events.map((e) => e.data);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  expect(events.at(-1)).toMatchObject({ type: "run_completed" });
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", output: "Echo: after a lost connection" });
});

it("a run that could not start, whose claim PostgreSQL then lost, is started by another worker", async () => {
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "claimed twice" }, headers: tenant.headers, timeoutMs: 30_000 });
  await live.waitFor((e) => e.type === "run_started");
  const runId: string = live.events[0].run_id;
  const control = () => ({ signal: new AbortController().signal, stop: () => {}, closing: new AbortController().signal });
  await expect(executeRun(workerDeps(), runId, control())).rejects.toThrow("Connection terminated");
  // A PostgreSQL crash undoes the claim (it commits asynchronously): the run is queued again.
  await loseClaim(prisma, runId);

  // The job's next attempt goes to another worker, whose claim is a fresh one: the run's log is its to write.
  await executeRun(workerDeps("worker-other", new AgentCache(prisma)), runId, control());
  const events = (await live.result).events.map((e) => e.data);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  expect(events.at(-1)).toMatchObject({ type: "run_completed" });
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", output: "Echo: claimed twice", workerId: "worker-other" });
  // Streamed live through the run's log, which the first worker had left (not refused to the
  // second, which would have been stopped as superseded, its end found later in PostgreSQL).
  const logged = (await redis.lrange(runLogKey(stack.env.REDIS_PREFIX!, runId), 0, -1)).flatMap((json) => [JSON.parse(json)].flat() as { type: string }[]);
  expect(logged.map((e) => e.type)).toEqual(events.slice(1).map((e) => e.type));
  expect(await redis.get(runWriterKey(stack.env.REDIS_PREFIX!, runId))).toBe("worker-other");
});

it("a run whose start meets an outage on more tries than its job has attempts goes back to the queue each time, and then answers", async () => {
  const agents = new AgentsLosingOneRead(prisma);
  // More than BullMQ's 3 attempts would absorb, fewer than the hand-backs allowed.
  agents.failures = 5;
  expect(agents.failures).toBeLessThan(MAX_START_DEFERRALS);
  const deps = workerDeps("worker-deferring", agents);
  const queueWorker = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(deps.redisPrefix), connection: { url: stack.env.REDIS_URL! }, logger: deps.logger, processor: agentRunProcessor(deps, new ActiveRuns()) });
  const failedAttempts: number[] = [];
  queueWorker.on("failed", (job) => failedAttempts.push(job?.attemptsMade ?? -1));
  try {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "after five lost connections" }, headers: tenant.headers, timeoutMs: 30_000 });
    const events = (await live.result).events.map((e) => e.data);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({ type: "run_completed" });
    expect(agents.failures).toBeLessThan(0);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: events[0]!.run_id as string } })).toMatchObject({ status: "completed", output: "Echo: after five lost connections" });
    // No attempt of the job was used up by the outage.
    expect(failedAttempts).toEqual([]);
  } finally {
    await queueWorker.close();
  }
}, 40_000);

it("a run whose job has been handed back as often as it may uses up an attempt at the next outage, and then answers", async () => {
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "after many hand-backs" }, headers: tenant.headers, timeoutMs: 30_000 });
  await live.waitFor((e) => e.type === "run_started");
  const runId: string = live.events[0].run_id;
  const queue = createRunQueue({ connection: { url: stack.env.REDIS_URL! }, redisPrefix: stack.env.REDIS_PREFIX! });
  const job = await queue.getJob(runId);
  await job!.updateData({ runId, deferrals: MAX_START_DEFERRALS });
  await queue.close();

  const deps = workerDeps("worker-deferred-out", new AgentsLosingOneRead(prisma));
  const queueWorker = createWorker({ queueName: AGENT_RUNS_QUEUE, prefix: bullPrefix(deps.redisPrefix), connection: { url: stack.env.REDIS_URL! }, logger: deps.logger, processor: agentRunProcessor(deps, new ActiveRuns()) });
  const failed: [string | undefined, number | undefined, string | undefined][] = [];
  queueWorker.on("failed", (j, err) => failed.push([j?.id, j?.attemptsMade, err.message]));
  try {
    const events = (await live.result).events.map((e) => e.data);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({ type: "run_completed" });
    // The outage's error failed one attempt (BullMQ tried the job again), not a hand-back.
    expect(failed.filter(([id]) => id === runId)).toEqual([[runId, 1, "Connection terminated unexpectedly"]]);
  } finally {
    await queueWorker.close();
  }
}, 40_000);
