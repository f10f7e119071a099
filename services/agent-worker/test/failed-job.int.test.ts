import type Redis from "ioredis";
import { createLogger } from "@agentrun/logger";
import { stackWithTenant, watchSse, within, type SseWatch, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { runHeartbeatKey } from "@agentrun/events";
import { endRunOfFailedJob } from "../src/runs/failed-job";

// No worker: runs stay queued, and this test plays the worker whose job failed for good.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let redis: Redis;

stackWithTenant((started) => ({ stack, prisma, tenant, redis } = started as typeof started & { redis: Redis }), { stack: { workers: 0, memory: false }, redis: true });

/** A heartbeat TTL of 900 ms: a live worker renews it every 300 ms. */
const deps = () => ({ prisma, redis, redisPrefix: stack.env.REDIS_PREFIX!, workerId: "worker-here", heartbeatTtlMs: 900, logger: createLogger({ service: "failed-job-test", level: "silent" }) });

/** A run accepted and queued, with its stream open. */
async function queuedRun(): Promise<{ runId: string; live: SseWatch }> {
  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "a job that fails" }, headers: tenant.headers, timeoutMs: 20_000 });
  await live.waitFor((e) => e.type === "run_started");
  return { runId: live.events[0].run_id, live };
}

/** The run as a worker executing it would have it. */
const markRunning = (runId: string, workerId: string) => prisma.run.update({ where: { id: runId }, data: { status: "running", workerId, startedAt: new Date() } });

describe("the run of a job that failed for good", () => {
  it("is ended when queued and its claim failed for another reason than an outage, and its stream gets run_failed", async () => {
    const { runId, live } = await queuedRun();
    expect(await endRunOfFailedJob(deps(), runId, new Error("the claim was refused"))).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "internal_error" } });
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "failed", errorCode: "internal_error" });
  });

  it("is left queued when its claim failed for an outage, for the queued-run sweep to queue again", async () => {
    const { runId, live } = await queuedRun();
    expect(await endRunOfFailedJob(deps(), runId, new Error("Connection is closed."))).toBe(false);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "queued", errorCode: null });
    // (Cancelled, to end its stream.)
    const cancel = await fetch(`${stack.gatewayUrl}/api/tasks/${live.events[0].task_id}/runs/${runId}/cancel`, { method: "POST", headers: tenant.headers });
    expect(cancel.status).toBe(202);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_cancelled" });
  });

  it("is left to a worker that sets its heartbeat again within a renewal period (a Redis outage outlasted its TTL)", async () => {
    const { runId, live } = await queuedRun();
    await markRunning(runId, "worker-elsewhere");
    const hbKey = runHeartbeatKey(stack.env.REDIS_PREFIX!, runId);
    const decided = endRunOfFailedJob(deps(), runId, new Error("job stalled more than allowable limit"));
    // The live worker's next renewal comes a moment later.
    await new Promise((r) => setTimeout(r, 150));
    await redis.set(hbKey, "worker-elsewhere", "PX", 900);
    expect(await decided).toBe(false);
    expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("running");
    await redis.del(hbKey);
    expect(await endRunOfFailedJob(deps(), runId, new Error("job stalled more than allowable limit"))).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
  });

  it("is left to another worker that keeps its heartbeat, and ended once that heartbeat is gone", async () => {
    const { runId, live } = await queuedRun();
    await markRunning(runId, "worker-elsewhere");
    const hbKey = runHeartbeatKey(stack.env.REDIS_PREFIX!, runId);
    await redis.set(hbKey, "worker-elsewhere", "PX", 30_000);
    const stalled = new Error("job stalled more than allowable limit");
    expect(await endRunOfFailedJob(deps(), runId, stalled)).toBe(false);
    expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("running");

    await redis.del(hbKey);
    expect(await endRunOfFailedJob(deps(), runId, stalled)).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
  });

  it("is left running while this worker is still executing it (its own stall check failed the job)", async () => {
    const { runId, live } = await queuedRun();
    await markRunning(runId, "worker-here");
    await redis.set(runHeartbeatKey(stack.env.REDIS_PREFIX!, runId), "worker-here", "PX", 30_000);
    const stalled = new Error("job stalled more than allowable limit");
    expect(await endRunOfFailedJob(deps(), runId, stalled, (id) => id === runId)).toBe(false);
    expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("running");
    // Once it no longer executes it, the run is ended.
    expect(await endRunOfFailedJob(deps(), runId, stalled, () => false)).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
  });

  it("is left to the orphan sweep when this worker stops while it waits for a renewal", async () => {
    const { runId, live } = await queuedRun();
    await markRunning(runId, "worker-gone");
    const stopping = new AbortController();
    // A 30 s TTL: the wait for a renewal would last 10.5 s.
    const decided = endRunOfFailedJob({ ...deps(), heartbeatTtlMs: 30_000 }, runId, new Error("job stalled more than allowable limit"), () => false, stopping.signal);
    await new Promise((r) => setTimeout(r, 100));
    stopping.abort();
    // Decided at once, not after the wait.
    expect(await within(decided, 5000)).toBe(false);
    expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("running");
    // Once it is decided without a shutdown, the run is ended.
    expect(await endRunOfFailedJob(deps(), runId, new Error("job stalled more than allowable limit"))).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "worker_lost" } });
  });

  it("is ended when the heartbeat is this worker's own (its claim set it, then failed)", async () => {
    const { runId, live } = await queuedRun();
    await markRunning(runId, "worker-gone");
    await redis.set(runHeartbeatKey(stack.env.REDIS_PREFIX!, runId), "worker-here", "PX", 30_000);
    expect(await endRunOfFailedJob(deps(), runId, new Error("Connection is closed."))).toBe(true);
    expect((await live.result).events.at(-1)!.data).toMatchObject({ type: "run_failed" });
  });
});
