import { isTerminalEvent } from "@agentrun/contracts";
import type { PrismaClient } from "@agentrun/db";
import { eventually, stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";

// RUN_TIMEOUT_MS is counted from a run's first claim: a run restarted by another worker (here,
// handed back by its worker's shutdown before it said anything) does not get a whole new limit.
const RUN_TIMEOUT_MS = 5000;
const workerEnv = { RUN_TIMEOUT_MS: String(RUN_TIMEOUT_MS), SHUTDOWN_GRACE_MS: "1000", LOCK_DURATION_MS: "3000", STALLED_INTERVAL_MS: "1000" };

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 2, memory: false, workerEnv } });

it("fails with run_timeout a restarted run at RUN_TIMEOUT_MS after its first claim, not after its restart", async () => {
  // 3 s of answer: within the limit on its own, past it once restarted a few seconds late.
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:1000][chunks:3] restarted late" }, headers: tenant.headers, timeoutMs: 60_000 });
  await watch.waitFor((e) => e.type === "run_started");
  const runId: string = watch.events[0].run_id;
  const first = await eventually(async () => {
    const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    return run.status === "running" && run;
  }, { timeoutMs: 10_000, intervalMs: 25 });
  stack.workerById(first.workerId!).child.kill("SIGTERM");

  const res = await watch.result;
  const events = res.events.map((e) => e.data);
  expect(events.filter(isTerminalEvent)).toHaveLength(1);
  expect(events.at(-1)).toMatchObject({ type: "run_failed", run_id: runId, error: { code: "run_timeout" } });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "failed", errorCode: "run_timeout", startedAt: first.startedAt });
  expect(run.workerId).not.toBe(first.workerId);
  // Ended at the limit from the first claim (with the machine's slack), not 3 s after the restart.
  const tookMs = run.completedAt!.getTime() - first.startedAt!.getTime();
  expect(tookMs).toBeGreaterThanOrEqual(RUN_TIMEOUT_MS - 50);
  expect(tookMs).toBeLessThan(RUN_TIMEOUT_MS + 2000);
}, 90_000);
