import { generateApiKey } from "@agentrun/api-keys";
import { runRequestSchema } from "@agentrun/contracts";
import { newId, type PrismaClient } from "@agentrun/db";
import { isUnavailableError } from "@agentrun/errors";
import { createTenant, stackWithTenant, eventually, readSse, runJson, startPgRelay, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import { ABANDONED_CLAIM_MS, IDEMPOTENCY_TTL_MS, claimIdempotencyKey, releaseIdempotencyKey, requestHash, UNQUEUED_CODE } from "../src/runs/idempotency";

// What a replay of an Idempotency-Key gets when the run it names is gone, or not there yet.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { memory: false } });

const keyed = (key: string) => ({ ...tenant.headers, "idempotency-key": key });
const run = (key: string, query: string) => runJson(stack.gatewayUrl, keyed(key), { query });

/**
 * A key claimed by a request that has not created its run yet (between its claim and its
 * insert), as `claimIdempotencyKey` leaves it. Returns the run id it names.
 */
async function claimedKey(key: string, query: string): Promise<string> {
  const runId = newId("run");
  const hash = requestHash(tenant.agentId, runRequestSchema.parse({ query }));
  await prisma.idempotencyKey.create({
    data: { orgId: tenant.orgId, key, requestHash: hash, runId, taskId: newId("task"), expiresAt: new Date(Date.now() + IDEMPOTENCY_TTL_MS) },
  });
  return runId;
}

it("frees a key with its run's task: a replay after DELETE /api/tasks/{id} starts a new run at once", async () => {
  const key = `key-${newId("run")}`;
  const first = await run(key, "remember me");
  expect(first.status).toBe(200);
  const del = await fetch(`${stack.gatewayUrl}/api/tasks/${first.body.task_id}`, { method: "DELETE", headers: tenant.headers });
  expect(del.status).toBe(204);
  expect(await prisma.idempotencyKey.count({ where: { orgId: tenant.orgId, key } })).toBe(0);

  const t0 = Date.now();
  const replay = await run(key, "remember me");
  expect(Date.now() - t0).toBeLessThan(3000);
  expect(replay.status).toBe(200);
  expect(replay.body).toMatchObject({ status: "completed", output: "Echo: remember me" });
  expect(replay.body.run_id).not.toBe(first.body.run_id);
  expect(replay.body.task_id).not.toBe(first.body.task_id);
  // The key now names the new run: replays answer with it.
  expect((await run(key, "remember me")).body.run_id).toBe(replay.body.run_id);
});

it("keeps a key for 24 hours by the database's clock, which also decides when they have passed", async () => {
  const key = `key-${newId("run")}`;
  expect((await run(key, "kept a day")).status).toBe(200);
  const row = await prisma.idempotencyKey.findUniqueOrThrow({ where: { orgId_key: { orgId: tenant.orgId, key } } });
  expect(row.expiresAt.getTime() - row.createdAt.getTime()).toBe(IDEMPOTENCY_TTL_MS);
});

it("leaves the keys of other tasks alone", async () => {
  const [kept, dropped] = [`key-${newId("run")}`, `key-${newId("run")}`];
  const a = await run(kept, "stays");
  const b = await run(dropped, "goes");
  expect((await fetch(`${stack.gatewayUrl}/api/tasks/${b.body.task_id}`, { method: "DELETE", headers: tenant.headers })).status).toBe(204);
  expect(await prisma.idempotencyKey.findMany({ where: { orgId: tenant.orgId, key: { in: [kept, dropped] } }, select: { key: true, runId: true } })).toEqual([
    { key: kept, runId: a.body.run_id },
  ]);
});

it("still waits for a run that is being accepted, and answers with it once it exists", async () => {
  const key = `key-${newId("run")}`;
  const runId = await claimedKey(key, "[chunks:2] accepted late");
  const replay = readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:2] accepted late" }, headers: keyed(key), until: () => true });
  await new Promise((r) => setTimeout(r, 1000));
  // The first request records its run (as createRun does).
  const row = await prisma.idempotencyKey.findUniqueOrThrow({ where: { orgId_key: { orgId: tenant.orgId, key } } });
  const started = JSON.stringify({ seq: 1, type: "run_started", run_id: runId, task_id: row.taskId });
  await prisma.$queryRaw`SELECT agentrun_create_run(${runId}, ${row.taskId}, true, ${tenant.orgId}, ${tenant.agentId}, ${"[chunks:2] accepted late"},
    ${"accepted late"}, null, null::jsonb, null::jsonb, null, 1, ${newId("led")}, ${started}::jsonb)`;
  const { status, events } = await replay;
  expect(status).toBe(200);
  expect(events[0]!.data).toEqual({ seq: 1, type: "run_started", run_id: runId, task_id: row.taskId });
}, 30_000);

it("answers 409 run_in_progress when the run being accepted does not appear", async () => {
  const key = `key-${newId("run")}`;
  await claimedKey(key, "never recorded");
  const t0 = Date.now();
  const replay = await run(key, "never recorded");
  expect(replay).toMatchObject({ status: 409, body: { error: { code: "run_in_progress" } } });
  expect(Date.now() - t0).toBeGreaterThanOrEqual(4500);
}, 30_000);

it("claims a key freed while the replay waits (its first request was refused) and starts the run at once", async () => {
  const key = `key-${newId("run")}`;
  const runId = await claimedKey(key, "second try");
  const t0 = Date.now();
  const replay = run(key, "second try");
  await new Promise((r) => setTimeout(r, 500));
  // As releaseIdempotencyKey does for a refused request.
  await prisma.idempotencyKey.deleteMany({ where: { orgId: tenant.orgId, key, runId } });
  const res = await replay;
  expect(Date.now() - t0).toBeLessThan(3000);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ status: "completed", output: "Echo: second try" });
  expect(res.body.run_id).not.toBe(runId);
}, 30_000);

it("takes over a claim abandoned before its run was created (its gateway died): a replay then starts the run", async () => {
  const key = `key-${newId("run")}`;
  const runId = await claimedKey(key, "claimed then abandoned");
  // A claim younger than ABANDONED_CLAIM_MS is still waited for (previous test); this one is older.
  await prisma.$executeRaw`UPDATE idempotency_keys SET created_at = now() - make_interval(secs => ${ABANDONED_CLAIM_MS / 1000 + 1}) WHERE org_id = ${tenant.orgId} AND key = ${key}`;
  const t0 = Date.now();
  const replay = await run(key, "claimed then abandoned");
  expect(Date.now() - t0).toBeLessThan(3000);
  expect(replay).toMatchObject({ status: 200, body: { status: "completed", output: "Echo: claimed then abandoned" } });
  expect(replay.body.run_id).not.toBe(runId);
  expect((await run(key, "claimed then abandoned")).body.run_id).toBe(replay.body.run_id);
}, 30_000);

it("takes over a key whose run the queue could not take, when its release failed: a replay starts a new run", async () => {
  const key = `key-${newId("run")}`;
  const first = await run(key, "queue was down");
  expect(first.status).toBe(200);
  // What failUnqueuedRun leaves when the key's release that follows it fails.
  await prisma.run.update({ where: { id: first.body.run_id }, data: { status: "failed", errorCode: UNQUEUED_CODE } });
  const replay = await run(key, "queue was down");
  expect(replay).toMatchObject({ status: 200, body: { status: "completed", output: "Echo: queue was down" } });
  expect(replay.body.run_id).not.toBe(first.body.run_id);
  // A run that failed otherwise keeps its key.
  await prisma.run.update({ where: { id: replay.body.run_id }, data: { status: "failed", errorCode: "model_error" } });
  expect((await run(key, "queue was down")).body.run_id).toBe(replay.body.run_id);
}, 30_000);

it("frees a key whose release PostgreSQL could not take at first, once it can (not 2 minutes later)", async () => {
  const key = `key-${newId("run")}`;
  const runId = await claimedKey(key, "refused while the pool was out");
  const relay = await startPgRelay(testEnv().databaseUrl);
  const unreachable = testPrisma(relay.url);
  try {
    relay.setDown(true);
    const refused = await releaseIdempotencyKey(unreachable, tenant.orgId, key, runId).then(() => null, (err: unknown) => err);
    expect(isUnavailableError(refused)).toBe(true);
    relay.setDown(false);
    await eventually(async () => (await prisma.idempotencyKey.count({ where: { orgId: tenant.orgId, key } })) === 0, { timeoutMs: 10_000 });
  } finally {
    await unreachable.$disconnect();
    await relay.close();
  }
  const replay = await run(key, "refused while the pool was out");
  expect(replay).toMatchObject({ status: 200, body: { status: "completed", output: "Echo: refused while the pool was out" } });
}, 30_000);

it("answers every one of a burst of identical keyed requests to a refused run with the refusal, not 409", async () => {
  const { creditBalance } = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
  await prisma.organization.update({ where: { id: tenant.orgId }, data: { creditBalance: 0 } });
  try {
    const headers = keyed(`k-burst-${Date.now()}`);
    const answers = await Promise.all(Array.from({ length: 10 }, () => runJson(stack.gatewayUrl, headers, { query: "refused for want of credits", stream: false })));
    expect(answers.map((a) => `${a.status} ${a.body.error?.code}`)).toEqual(Array(10).fill("402 insufficient_credits"));
    expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: "refused for want of credits" } })).toBe(0);
  } finally {
    await prisma.organization.update({ where: { id: tenant.orgId }, data: { creditBalance } });
  }
});

it("keeps keys per organization: another API key of it gets the same run, another organization a run of its own", async () => {
  const key = `key-${newId("run")}`;
  const first = await run(key, "one organization");
  expect(first.status).toBe(200);
  // A second API key of the same organization (a rotation, say).
  const second = generateApiKey();
  await prisma.apiKey.create({ data: { id: newId("key"), orgId: tenant.orgId, prefix: second.prefix, keyHash: second.keyHash, name: "rotated" } });
  const rotated = { ...keyed(key), authorization: `Bearer ${second.apiKey}` };
  const again = await runJson(stack.gatewayUrl, rotated, { query: "one organization" });
  expect([again.status, again.body.run_id]).toEqual([200, first.body.run_id]);
  expect((await runJson(stack.gatewayUrl, rotated, { query: "another request" })).body.error.code).toBe("idempotency_conflict");
  // The same key in another organization names nothing of the first one.
  const other = await createTenant(prisma);
  const theirs = await runJson(stack.gatewayUrl, { ...other.headers, "idempotency-key": key }, { query: "one organization" });
  expect(theirs.status).toBe(200);
  expect(theirs.body.run_id).not.toBe(first.body.run_id);
  expect(theirs.body.task_id).not.toBe(first.body.task_id);
});

it("claims a key without locking the organization's row, which every run of it updates", async () => {
  // A foreign key to organizations would share-lock the row for as long as the claim's
  // transaction lasts: FOR UPDATE NOWAIT from another session would then fail.
  const locked = await prisma.$transaction(async (tx) => {
    const hash = requestHash(tenant.agentId, runRequestSchema.parse({ query: "no lock" }));
    const claim = await claimIdempotencyKey(tx as unknown as PrismaClient, { orgId: tenant.orgId, key: `key-${newId("run")}`, hash, runId: newId("run"), taskId: newId("task") });
    expect(claim).toEqual({ owner: true });
    return prisma.$queryRaw<{ id: string }[]>`SELECT id FROM organizations WHERE id = ${tenant.orgId} FOR UPDATE NOWAIT`;
  });
  expect(locked).toEqual([{ id: tenant.orgId }]);
});
