import { createTenant, readSse, startPrivatePostgres, startStack, testPrisma, type PrivatePostgres, type Stack, type Tenant } from "@agentrun/testing";
import { ensureDatabase, migrateDeploy, type PrismaClient } from "@agentrun/db";

// The stack runs on a PostgreSQL cluster of its own, which this test stops and starts again.
let pg: PrivatePostgres;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  pg = await startPrivatePostgres();
  await ensureDatabase(pg.url);
  await migrateDeploy(pg.url);
  stack = await startStack({ env: { DATABASE_URL: pg.url }, workerEnv: { QUEUED_STALE_AFTER_MS: "3000" } });
  prisma = testPrisma(pg.url);
  tenant = await createTenant(prisma);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
  await pg?.destroy();
});

const postRun = (query: string) =>
  fetch(`${stack.gatewayUrl}/api/run`, {
    method: "POST",
    headers: { ...tenant.headers, "content-type": "application/json" },
    body: JSON.stringify({ query, stream: false }),
    signal: AbortSignal.timeout(20_000),
  });

it("answers 503 while PostgreSQL is down, finishes the run in progress when it returns, and resumes by itself", async () => {
  expect((await postRun("warm up")).status).toBe(200);
  let seen = 0;
  const stream = readSse(`${stack.gatewayUrl}/api/run`, {
    body: { query: "[sleep:100][chunks:30] through a database outage" },
    headers: tenant.headers,
    timeoutMs: 90_000,
    until: () => {
      seen++;
      return false;
    },
  });
  while (seen < 3) await new Promise((r) => setTimeout(r, 20));
  await pg.stop();

  // Past the API key cache, so the request needs the database.
  await new Promise((r) => setTimeout(r, 1000));
  const t0 = Date.now();
  const during = await postRun("during the outage");
  expect(during.status).toBe(503);
  expect(((await during.json()) as any).error.code).toBe("unavailable");
  expect(Date.now() - t0).toBeLessThan(6000);

  await new Promise((r) => setTimeout(r, 2000));
  await pg.start();

  const res = await stream;
  const seqs = res.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, k) => k + 1));
  expect(res.events.at(-1)!.data.type).toBe("run_completed");
  expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: through a database outage");
  const runId = res.events[0]!.data.run_id;
  expect(await prisma.runEvent.count({ where: { runId } })).toBe(res.events.length);
  expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");

  const deadline = Date.now() + 20_000;
  let body: any = null;
  while (Date.now() < deadline) {
    const r = await postRun("after the outage").catch(() => null);
    if (r?.status === 200) {
      body = await r.json();
      break;
    }
    await new Promise((r2) => setTimeout(r2, 500));
  }
  expect(body).toMatchObject({ status: "completed", output: "Echo: after the outage" });
});
