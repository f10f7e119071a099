import type Redis from "ioredis";
import { eventually, stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import { isTerminalEvent } from "@agentrun/contracts";
import type { PrismaClient } from "@agentrun/db";
import { runHeartbeatKey } from "@agentrun/events";

// A 5 s lock: a worker taking over a stopped worker's run waits up to two of them (10 s) for its
// heartbeat to lapse. The grace outlasts that wait, so a worker that sat it out still exits cleanly.
const workerEnv = { LOCK_DURATION_MS: "5000", STALLED_INTERVAL_MS: "1000", RUN_STALE_AFTER_MS: "120000", SHUTDOWN_GRACE_MS: "15000" };

let stack: Stack;
let prisma: PrismaClient;
let redis: Redis;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant, redis } = started as typeof started & { redis: Redis }), { stack: { workers: 2, memory: false, workerEnv }, redis: true });

describe("a worker that closes while it waits to take over a stopped worker's run", () => {
  it("gives the job back at once and exits, taking nothing; the run's own worker finishes it", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:200][chunks:30] waited for" }, headers: tenant.headers, timeoutMs: 60_000 });
    await live.waitFor((e, all) => e.type === "text_chunk" && all.length >= 3);
    const runId: string = live.events[0].run_id;
    const { workerId } = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    const owner = stack.workerById(workerId!);
    const taker = stack.workers.find((w) => w !== owner)!;
    const prefix = stack.env.REDIS_PREFIX!;
    const jobKey = `${prefix}:bull:agent-runs:${runId}`;
    const hbKey = runHeartbeatKey(prefix, runId);

    // The owner pauses past its job's lock; its heartbeat, held here for it, stays set, so the
    // other worker, handed the stalled job, waits for it to lapse.
    owner.child.kill("SIGSTOP");
    try {
      await redis.set(hbKey, workerId!, "PX", 60_000);
      await eventually(async () => Number(await redis.hget(jobKey, "ats")) >= 2, { timeoutMs: 20_000, intervalMs: 50 });
      await new Promise((r) => setTimeout(r, 500));

      const exited = new Promise<number | null>((resolve) => taker.child.once("exit", (code) => resolve(code)));
      const termAt = Date.now();
      taker.child.kill("SIGTERM");
      const code = await exited;
      // Without the hand-back it sat out the takeover wait (up to 10 s) before it could exit.
      expect(Date.now() - termAt).toBeLessThan(4000);
      expect(code).toBe(0);
      // The job is back in the queue, not acknowledged; the run and its heartbeat are untouched.
      const state = await redis.eval(
        `for _, s in ipairs({'wait', 'prioritized', 'delayed'}) do
           local k = KEYS[1] .. ':' .. s
           if redis.call('TYPE', k).ok == 'zset' then if redis.call('ZSCORE', k, ARGV[1]) then return s end
           elseif redis.call('LPOS', k, ARGV[1]) then return s end
         end
         return false`,
        1,
        `${prefix}:bull:agent-runs`,
        runId,
      );
      expect(["wait", "prioritized", "delayed"]).toContain(state);
      expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("running");
      expect(await redis.get(hbKey)).toBe(workerId);
    } finally {
      owner.child.kill("SIGCONT");
    }

    // The owner wakes up and ends its run, with every event streamed once.
    const streamed = (await live.result).events;
    expect(streamed.at(-1)!.data).toMatchObject({ type: "run_completed" });
    expect(streamed.filter((e) => isTerminalEvent(e.data))).toHaveLength(1);
    expect(streamed.map((e) => Number(e.id))).toEqual(streamed.map((_, i) => i + 1));
    await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status === "completed", { timeoutMs: 10_000 });
  }, 90_000);
});
