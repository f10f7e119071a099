import { createTenant, eventually, postRun, readSse, startStackOnPrivatePostgres, type PrivatePostgres, type PrivatePostgresStack, type Stack, type Tenant } from "@agentrun/testing";
import { SCHEMA_CHECK_REUSE_MS, type PrismaClient } from "@agentrun/db";
import { setTimeout as sleep } from "node:timers/promises";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(120_000);

// The stack runs on a PostgreSQL cluster of its own, which this test freezes: a database that
// stops answering without refusing connections, as a hung host or a network partition does.
const QUERY_TIMEOUT_MS = 2000;
/** How long `stream: false` waits for its run before answering 202. */
const WAIT_MS = 3000;
let own: PrivatePostgresStack;
let pg: PrivatePostgres;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  own = await startStackOnPrivatePostgres({
    env: { DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS) },
    gatewayEnv: { RUN_WAIT_TIMEOUT_MS: String(WAIT_MS) },
    workerEnv: { QUEUED_STALE_AFTER_MS: "3000" },
  });
  ({ pg, stack, prisma } = own);
  tenant = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000 });
}, 120_000);

afterAll(async () => {
  await own?.stop();
});

const listTasks = () => fetch(`${stack.gatewayUrl}/api/tasks?limit=1`, { headers: tenant.headers, signal: AbortSignal.timeout(30_000) });

it("answers 503 within the query timeout while PostgreSQL stops answering, never runs what it refused, and resumes by itself", async () => {
  expect((await postRun(stack.gatewayUrl, tenant.headers, { query: "warm up" })).status).toBe(200);
  // Requests at once, so that the gateway holds several open connections that the freeze will catch.
  for (const res of await Promise.all(Array.from({ length: 8 }, listTasks))) expect(res.status).toBe(200);

  pg.freeze();
  let frozen = true;
  try {
    // At once, while the API key is still cached: the run's creation itself is sent to the frozen
    // database. Then, past the cache, requests whose first statement already waits.
    const t0 = Date.now();
    const created = postRun(stack.gatewayUrl, tenant.headers, { query: "asked while frozen" }, 30_000);
    await new Promise((r) => setTimeout(r, 1200));
    const during = await Promise.all([created, ...Array.from({ length: 6 }, listTasks)]);
    const elapsed = Date.now() - t0;
    expect(during.map((r) => r.status)).toEqual(Array(7).fill(503));
    for (const r of during) expect(await r.json()).toEqual({ error: { code: "unavailable", message: expect.stringMatching(/\S/) } });
    // Each waited at most for a connection (2 s) and then for a statement or two: never for ever.
    expect(elapsed).toBeLessThan(1200 + 2000 + 2 * QUERY_TIMEOUT_MS + 3000);
    pg.thaw();
    frozen = false;
  } finally {
    if (frozen) pg.thaw();
  }

  // Service resumes by itself.
  await eventually(async () => (await postRun(stack.gatewayUrl, tenant.headers, { query: "after the freeze" })).status === 200, { timeoutMs: 30_000 });

  // The statement that created the refused run reached the database if its API key was still
  // cached (a loaded machine may have taken longer than the cache's second, and then the key's
  // lookup was what timed out): carried out once the database answered, that run ends without
  // ever running (no text, nothing charged). Time for a sweep of old queued runs, had it been
  // left queued.
  await new Promise((r) => setTimeout(r, 4000));
  const refused = await eventually(
    async () => {
      const runs = await prisma.run.findMany({ where: { orgId: tenant.orgId, query: "asked while frozen" } });
      return runs.every((r) => r.status === "failed" || r.status === "cancelled") && runs;
    },
    { timeoutMs: 30_000 },
  );
  expect(refused.length).toBeLessThanOrEqual(1);
  for (const run of refused) {
    expect({ status: run.status, credits: run.creditsUsed, output: run.output }).toEqual({ status: expect.stringMatching(/^(failed|cancelled)$/), credits: 0, output: "" });
  }
});

it("answers 202 with the run's status at the wait limit while PostgreSQL does not answer: the run was accepted, a 503 would invite a second one", async () => {
  const t0 = Date.now();
  const answer = postRun(stack.gatewayUrl, tenant.headers, { query: "[sleep:150][chunks:40] outlasting the wait" }, 30_000);
  await new Promise((r) => setTimeout(r, 1000));
  pg.freeze();
  let res: Response;
  try {
    res = await answer;
  } finally {
    pg.thaw();
  }
  expect(res.status).toBe(202);
  const body = (await res.json()) as { run_id: string; task_id: string; status: string };
  expect(body).toEqual({ run_id: expect.any(String), task_id: expect.any(String), status: "running" });
  expect(Date.now() - t0).toBeLessThan(WAIT_MS + 2 * QUERY_TIMEOUT_MS + 3000);
  // The run goes on once the database answers again, and loses nothing: its events are seq 1…N
  // once each, its whole answer, and a client re-attaching from the start gets every one of them.
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: body.run_id } })).status === "completed", { timeoutMs: 60_000 });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: body.run_id }, include: { task: true } });
  expect(run).toMatchObject({ output: "Echo: outlasting the wait", task: { activeRunId: null, status: "completed" } });
  const stored = await readDbEvents({ prisma }, body.run_id);
  expect(stored.map((e) => e.seq)).toEqual(stored.map((_, k) => k + 1));
  expect(stored.filter((e) => ["run_completed", "run_failed", "run_cancelled"].includes(e.type)).map((e) => [e.seq, e.type])).toEqual([[stored.length, "run_completed"]]);
  expect(stored.flatMap((e) => (e.type === "text_chunk" ? [e.content] : [])).join("")).toBe("Echo: outlasting the wait");
  const replay = await readSse(`${stack.gatewayUrl}/api/tasks/${body.task_id}/runs/${body.run_id}/events`, { headers: tenant.headers });
  expect(replay.events.map((e) => e.data)).toEqual(stored);

  // Every run of the tenant ended: those answered 200 completed; any other (a request refused
  // with 503 whose creation had reached the database) ended without running, free.
  const runs = await prisma.run.findMany({ where: { orgId: tenant.orgId }, orderBy: { createdAt: "asc" } });
  expect(runs.filter((r) => r.status === "completed").map((r) => r.query)).toEqual(["warm up", "after the freeze", "[sleep:150][chunks:40] outlasting the wait"]);
  for (const r of runs.filter((r) => r.status !== "completed")) expect({ status: r.status, credits: r.creditsUsed, output: r.output }).toEqual({ status: expect.stringMatching(/^(failed|cancelled)$/), credits: 0, output: "" });
});

it("answers /readyz 503 within a second on the gateway and the memory service while PostgreSQL does not answer, and 200 once it does", async () => {
  const ready = async (base: string) => {
    const t0 = Date.now();
    const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(30_000) });
    return { status: res.status, database: ((await res.json()) as any).error?.details?.database, ms: Date.now() - t0 };
  };
  const bases = [stack.gatewayUrl, stack.memoryUrl];
  await eventually(async () => (await Promise.all(bases.map(ready))).every((r) => r.status === 200), { timeoutMs: 30_000 });

  pg.freeze();
  let during: Awaited<ReturnType<typeof ready>>[];
  try {
    // A check settled within SCHEMA_CHECK_REUSE_MS answers for the next: past it, each probe checks anew.
    await sleep(SCHEMA_CHECK_REUSE_MS + 100);
    during = await Promise.all(bases.map(ready));
  } finally {
    pg.thaw();
  }
  expect(during.map(({ status, database }) => ({ status, database }))).toEqual([
    { status: 503, database: "unavailable" },
    { status: 503, database: "unavailable" },
  ]);
  // Bounded by the readiness check's 900 ms, not by the query timeout (2 s) or the pool's connect timeout (2 s).
  for (const r of during) expect(r.ms).toBeLessThan(QUERY_TIMEOUT_MS - 200);

  await eventually(async () => (await Promise.all(bases.map(ready))).every((r) => r.status === 200), { timeoutMs: 30_000 });
});
