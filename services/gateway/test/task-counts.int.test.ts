import { createTenant, startStack, testEnv, testPrisma, watchSse, eventually, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// `GET /api/tasks`'s `total` comes from `task_counts`, kept by the run functions as a run moves
// its task between statuses and by triggers for every other writer of `tasks`. Each step below
// compares the totals per status with a count of the tasks themselves.

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  // One run at a time, so that a second run stays queued (its task pending) behind a busy one.
  stack = await startStack({ memory: false, workerEnv: { WORKER_CONCURRENCY: "1" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { credits: 10_000, plan: "enterprise", rpmLimit: 10_000 });
});
afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

const STATUSES = ["pending", "running", "completed", "failed"] as const;

const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${stack.gatewayUrl}/api${path}`, {
    method,
    headers: { ...tenant.headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
};
const run = (query: string, extra: object = {}) => api("POST", "/run", { query, stream: false, ...extra });

/** Totals per status as the API reports them, and as the tasks table says they are. */
async function totals(): Promise<{ reported: Record<string, number>; actual: Record<string, number> }> {
  const reported: Record<string, number> = {};
  for (const s of STATUSES) reported[s] = (await api("GET", `/tasks?status=${s}&limit=1`)).body.total;
  reported.all = (await api("GET", "/tasks?limit=1")).body.total;
  const rows = await prisma.task.groupBy({ by: ["status"], where: { agentId: tenant.agentId }, _count: true });
  const actual: Record<string, number> = { pending: 0, running: 0, completed: 0, failed: 0, all: 0 };
  for (const r of rows) {
    actual[r.status] = r._count;
    actual.all! += r._count;
  }
  return { reported, actual };
}

async function expectExactTotals(expected: Partial<Record<string, number>>): Promise<void> {
  const { reported, actual } = await totals();
  expect(reported).toEqual(actual);
  expect(actual).toMatchObject(expected);
}

describe("task totals per status", () => {
  it("follow every run's task from pending to running to its end, and tasks reused, failed, cancelled or deleted", async () => {
    await expectExactTotals({ all: 0 });

    // A new task per run: completed, failed.
    const done = await run("one");
    expect(done.status).toBe(200);
    expect((await run("[error:500] two")).status).toBe(200);
    await expectExactTotals({ completed: 1, failed: 1, all: 2 });

    // A task created through the API (pending), then a run on it, then a failing run on it.
    const created = await api("POST", "/tasks", { title: "made first" });
    await expectExactTotals({ pending: 1, all: 3 });
    expect((await run("three", { task_id: created.body.task_id })).body.status).toBe("completed");
    await expectExactTotals({ pending: 0, completed: 2, failed: 1 });
    expect((await run("[error:500] four", { task_id: created.body.task_id })).body.status).toBe("failed");
    await expectExactTotals({ completed: 1, failed: 2 });
    // A failed task runs again and completes.
    expect((await run("five", { task_id: created.body.task_id })).body.status).toBe("completed");
    await expectExactTotals({ completed: 2, failed: 1, all: 3 });

    // A run in progress (running) and one queued behind it (pending), on tasks that existed.
    const busy = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[hang]", task_id: done.body.task_id }, headers: tenant.headers });
    await busy.waitFor((e) => e.type === "run_started");
    await eventually(async () => (await totals()).actual.running === 1);
    const queued = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "waiting" }, headers: tenant.headers });
    await queued.waitFor((e) => e.type === "run_started");
    await expectExactTotals({ pending: 1, running: 1, completed: 1, failed: 1, all: 4 });

    // Cancelled while queued, then while running: both tasks end completed.
    const q = queued.events[0];
    expect((await api("POST", `/tasks/${q.task_id}/runs/${q.run_id}/cancel`)).body.status).toBe("cancelled");
    await queued.result;
    await expectExactTotals({ pending: 0, running: 1, completed: 2 });
    const b = busy.events[0];
    expect((await api("POST", `/tasks/${b.task_id}/runs/${b.run_id}/cancel`)).status).toBe(202);
    expect((await busy.result).events.at(-1)!.data.type).toBe("run_cancelled");
    await expectExactTotals({ pending: 0, running: 0, completed: 3, failed: 1, all: 4 });

    // Deleting a task takes it out of its status's total.
    expect((await api("DELETE", `/tasks/${done.body.task_id}`)).status).toBe(204);
    await expectExactTotals({ completed: 2, failed: 1, all: 3 });

    // No counter row went below zero on the way.
    const negative = await prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM task_counts WHERE agent_id = ${tenant.agentId} AND n < 0`;
    expect(Number(negative[0]!.n)).toBe(0);
  });

  it("stay exact when many runs of one agent start and end at once", async () => {
    const before = await totals();
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => run(i % 3 === 0 ? `[error:500] ${i}` : `q ${i}`)));
    expect(results.map((r) => r.status)).toEqual(Array(24).fill(200));
    const after = await totals();
    expect(after.reported).toEqual(after.actual);
    expect(after.actual.completed! - before.actual.completed!).toBe(16);
    expect(after.actual.failed! - before.actual.failed!).toBe(8);
  });
});
