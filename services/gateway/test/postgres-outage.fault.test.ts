import { postRun, createTenant, eventually, watchSse, startStackOnPrivatePostgres, type PrivatePostgres, type PrivatePostgresStack, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(120_000);

// The stack runs on a PostgreSQL cluster of its own, which this test stops and starts again.
let own: PrivatePostgresStack;
let pg: PrivatePostgres;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  own = await startStackOnPrivatePostgres({ workerEnv: { QUEUED_STALE_AFTER_MS: "3000" } });
  ({ pg, stack, prisma } = own);
  tenant = await createTenant(prisma);
}, 120_000);

afterAll(async () => {
  await own?.stop();
});

const postQuery = (query: string) => postRun(stack.gatewayUrl, tenant.headers, { query });

it("answers 503 while PostgreSQL is down, finishes the run in progress when it returns, and resumes by itself", async () => {
  const step = (s: string) => process.env.DEBUG_FAULTS && console.log(new Date().toISOString(), s);
  expect((await postQuery("warm up")).status).toBe(200);
  const watch = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:30] through a database outage" }, headers: tenant.headers, timeoutMs: 90_000 });
  await watch.waitFor((_, all) => all.length >= 3);
  await pg.stop();
  step("pg stopped");

  // Past the API key cache, so the request needs the database.
  await new Promise((r) => setTimeout(r, 1000));
  const t0 = Date.now();
  const during = await postQuery("during the outage");
  step(`during: ${during.status}`);
  expect(during.status).toBe(503);
  expect(await during.json()).toEqual({ error: { code: "unavailable", message: expect.stringMatching(/\S/) } });
  expect(Date.now() - t0).toBeLessThan(6000);

  await new Promise((r) => setTimeout(r, 2000));
  await pg.start();
  step("pg started");

  const res = await watch.result;
  step("stream done");
  const seqs = res.events.map((e) => Number(e.id));
  expect(seqs).toEqual(seqs.map((_, k) => k + 1));
  expect(res.events.at(-1)!.data.type).toBe("run_completed");
  expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: through a database outage");
  const runId = res.events[0]!.data.run_id;
  expect(await readDbEvents({ prisma }, runId)).toEqual(res.events.map((e) => e.data));
  expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");

  const body = await eventually(async () => {
    const r = await postQuery("after the outage");
    return r.status === 200 ? ((await r.json()) as any) : null;
  });
  expect(body).toMatchObject({ status: "completed", output: "Echo: after the outage" });

  // Every run of the tenant ended: the three answered ones completed, once each; any other (a
  // request refused with 503 whose creation had reached the database) failed without running.
  const runs = await eventually(async () => {
    const all = await prisma.run.findMany({ where: { orgId: tenant.orgId }, orderBy: { createdAt: "asc" } });
    return all.every((r) => r.status === "completed" || r.status === "failed") && all;
  }, { timeoutMs: 30_000 });
  expect(runs.filter((r) => r.status === "completed").map((r) => r.query)).toEqual(["warm up", "[sleep:100][chunks:30] through a database outage", "after the outage"]);
  for (const r of runs.filter((r) => r.status !== "completed")) expect({ credits: r.creditsUsed, output: r.output }).toEqual({ credits: 0, output: "" });
});
