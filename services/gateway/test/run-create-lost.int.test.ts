import { randomUUID } from "node:crypto";
import pg from "pg";
import { runRequestSchema } from "@agentrun/contracts";
import type { PrismaClient } from "@agentrun/db";
import { eventually, runJson, stackWithTenant, testEnv, type PgRelay, type Stack, type Tenant } from "@agentrun/testing";
import { requestHash } from "../src/runs/idempotency";

jest.setTimeout(90_000);

// The gateway reaches PostgreSQL through a relay that loses the answer to a run's creation after
// it committed: the client is told 503, so the run must never execute (a retry would start a
// second one), as when the creation times out.
let relay: PgRelay;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

// Queued runs left without a job are queued again after 3 s: a run the gateway did not end would execute then.
stackWithTenant((started) => ({ stack, prisma, tenant, relay } = started as typeof started & { relay: PgRelay }), {
  stack: { workerEnv: { QUEUED_STALE_AFTER_MS: "3000" } },
  tenant: { plan: "enterprise", rpmLimit: 100_000, credits: 100 },
  pgRelay: true,
});

it("ends, unexecuted and free, a run committed although its creation's answer was lost, and a retry with the same Idempotency-Key runs once", async () => {
  expect((await runJson(stack.gatewayUrl, tenant.headers, { query: "warm up" })).status).toBe(200);
  const balance = async () => (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;
  const before = await balance();

  // The run's query travels as a parameter of its creation: the cut finds that statement by it.
  const query = `lost answer ${randomUUID()}`;
  const headers = { ...tenant.headers, "idempotency-key": `k-${randomUUID()}` };
  const cuts = relay.cuts();
  relay.cutAfterNextAnswer(query);
  const lost = await runJson(stack.gatewayUrl, headers, { query });
  expect(relay.cuts()).toBe(cuts + 1);
  expect(lost).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });

  // The run was committed: it ends failed without a model call, and costs nothing.
  const [first] = await prisma.run.findMany({ where: { query, orgId: tenant.orgId } });
  expect(first).toBeDefined();
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: first!.id } })).status !== "queued", { timeoutMs: 20_000 });
  // Past the time the workers would have queued it again.
  await new Promise((r) => setTimeout(r, 5000));
  const ended = await prisma.run.findUniqueOrThrow({ where: { id: first!.id } });
  expect(ended).toMatchObject({ status: "failed", errorCode: "unavailable", creditsUsed: 0, promptTokens: 0 });

  // The same request again: one run, which executes.
  const retried = await runJson(stack.gatewayUrl, headers, { query });
  expect(retried).toMatchObject({ status: 200, body: { status: "completed", output: `Echo: ${query}` } });
  expect(retried.body.run_id).not.toBe(first!.id);
  const runs = await prisma.run.findMany({ where: { query, orgId: tenant.orgId }, orderBy: { createdAt: "asc" } });
  expect(runs.map((r) => r.status)).toEqual(["failed", "completed"]);
  expect(before - (await balance())).toBe(retried.body.credits_used);
});

it("frees an Idempotency-Key whose claim's answer was lost: the retry the 503 invites starts the run at once", async () => {
  const key = `k-claim-${randomUUID()}`;
  const headers = { ...tenant.headers, "idempotency-key": key };
  const cuts = relay.cuts();
  // The key travels as a parameter of its claim: the cut finds that statement by it.
  relay.cutAfterNextAnswer(key);
  const lost = await runJson(stack.gatewayUrl, headers, { query: "claimed, answer lost" });
  expect(relay.cuts()).toBe(cuts + 1);
  expect(lost).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });

  const t0 = Date.now();
  const retried = await eventually(async () => {
    const res = await runJson(stack.gatewayUrl, headers, { query: "claimed, answer lost" });
    if (res.status === 503) throw new Error("the release is still being retried");
    return res;
  }, { timeoutMs: 20_000 });
  expect(retried).toMatchObject({ status: 200, body: { status: "completed", output: "Echo: claimed, answer lost" } });
  expect(Date.now() - t0).toBeLessThan(15_000);
  expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: "claimed, answer lost" } })).toBe(1);
});

it("frees an Idempotency-Key whose claim timed out and committed only after the 503: the retry starts the run", async () => {
  const key = `k-late-${randomUUID()}`;
  const query = "claim committed after its 503";
  const headers = { ...tenant.headers, "idempotency-key": key };
  // An expired row for the key, which the claim replaces (it needs the row's lock); a transaction
  // holding that lock stands for whatever delays a commit (a stalled disk, a task delete's cascade).
  await prisma.idempotencyKey.create({
    data: { orgId: tenant.orgId, key, requestHash: requestHash(tenant.agentId, runRequestSchema.parse({ query })), runId: `run_${randomUUID()}`, taskId: `task_${randomUUID()}`, expiresAt: new Date(Date.now() - 1000) },
  });
  const locker = new pg.Client({ connectionString: testEnv().databaseUrl });
  await locker.connect();
  try {
    await locker.query("BEGIN");
    await locker.query("SELECT 1 FROM idempotency_keys WHERE org_id = $1 AND key = $2 FOR UPDATE", [tenant.orgId, key]);
    // The claim times out (DB_QUERY_TIMEOUT_MS) while PostgreSQL still runs it.
    expect(await runJson(stack.gatewayUrl, headers, { query })).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });
    await locker.query("COMMIT");
  } finally {
    await locker.end();
  }
  // The claim has committed now, naming a run that will never exist; the retry still starts one.
  const retried = await runJson(stack.gatewayUrl, headers, { query });
  expect(retried).toMatchObject({ status: 200, body: { status: "completed", output: `Echo: ${query}` } });
  expect(await prisma.run.count({ where: { orgId: tenant.orgId, query } })).toBe(1);
});
