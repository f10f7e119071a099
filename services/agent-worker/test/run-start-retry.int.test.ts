import type Redis from "ioredis";
import { stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { Agent, PrismaClient } from "@agentrun/db";
import { runHeartbeatKey } from "@agentrun/events";
import { createLogger } from "@agentrun/logger";
import { createMemoryClient } from "@agentrun/memory-client";
import { workerConfigSchema } from "../src/config";
import { AgentCache } from "../src/runs/agent-cache";
import { executeRun } from "../src/runs/execute-run";
import { ModelClients } from "../src/runs/model-clients";
import type { RunDeps } from "../src/runs/run-deps";
import { ToolRegistry } from "../src/tools/registry";

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

function workerDeps(): RunDeps {
  const config = workerConfigSchema.parse({ ...stack.env, WORKER_ID: "worker-in-test" });
  return {
    config,
    logger: createLogger({ service: "run-start-retry-test", level: "silent" }),
    prisma,
    redis,
    redisPrefix: config.REDIS_PREFIX,
    models: new ModelClients(config),
    agents: new AgentsLosingOneRead(prisma),
    tools: new ToolRegistry({ timeoutMs: 1000, maxBytes: 1000, allowPrivate: false }),
    memory: createMemoryClient({ baseUrl: config.MEMORY_URL, token: config.INTERNAL_TOKEN, timeoutMs: 500 }),
    workerId: "worker-in-test",
    heartbeatTtlMs: 600,
  };
}

it("a run whose start meets PostgreSQL out of reach is tried again, not failed, and then answers", async () => {
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "after a lost connection" }, headers: tenant.headers, timeoutMs: 30_000 });
  await live.waitFor((e) => e.type === "run_started");
  const runId: string = live.events[0].run_id;
  const deps = workerDeps();
  const control = () => ({ signal: new AbortController().signal, stop: () => {} });

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
