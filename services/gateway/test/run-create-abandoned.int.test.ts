import { randomUUID } from "node:crypto";
import pg from "pg";
import type { PrismaClient } from "@agentrun/db";
import { runCancelKey } from "@agentrun/events";
import { createTenant, eventually, runJson, startPgRelay, startStack, startTcpRelay, testEnv, testPrisma, type PgRelay, type Stack, type TcpRelay, type Tenant } from "@agentrun/testing";
import { Redis } from "ioredis";

jest.setTimeout(90_000);

// The gateway's host loses its network while a run's creation waits on a lock: the client gets
// 503 and the creation commits afterwards. The gateway reaches Redis and PostgreSQL through
// relays: Redis comes back for it after a second, PostgreSQL only after the workers (which reach
// both) have queued the run again (they do after 3 s): its cancel flag is all that stops it.
let relay: TcpRelay;
let pgRelay: PgRelay;
let stack: Stack;
let prisma: PrismaClient;
let redis: Redis;
let tenant: Tenant;

beforeAll(async () => {
  const env = testEnv();
  const target = new URL(env.redisUrl);
  relay = await startTcpRelay(target.hostname, Number(target.port || 6379));
  pgRelay = await startPgRelay(env.databaseUrl);
  stack = await startStack({
    gatewayEnv: { REDIS_URL: `redis://127.0.0.1:${relay.port}${target.pathname}`, DATABASE_URL: pgRelay.url },
    workerEnv: { QUEUED_STALE_AFTER_MS: "3000" },
  });
  prisma = testPrisma(env.databaseUrl);
  redis = new Redis(env.redisUrl, { maxRetriesPerRequest: 1 });
  tenant = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000, credits: 100 });
});

afterAll(async () => {
  await stack?.stop();
  await relay?.close();
  await pgRelay?.close();
  redis?.disconnect();
  await prisma?.$disconnect();
});

it("never executes a run whose creation committed after its 503 while the gateway could reach neither store", async () => {
  expect((await runJson(stack.gatewayUrl, tenant.headers, { query: "warm up" })).status).toBe(200);
  const balance = async () => (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;
  const before = await balance();

  const locker = new pg.Client({ connectionString: testEnv().databaseUrl });
  await locker.connect();
  try {
    // The creation reserves credits on the organization's row: it waits on this lock.
    await locker.query("BEGIN");
    await locker.query("SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE", [tenant.orgId]);
    const query = `abandoned ${randomUUID()}`;
    const answer = runJson(stack.gatewayUrl, tenant.headers, { query }, 30_000);
    // Watched from outside the lock's transaction, whose view of pg_stat_activity stays as first read.
    await eventually(async () => (await prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%agentrun_create_run%'`)[0]!.n > 0, { timeoutMs: 5000, intervalMs: 20 });
    relay.setDown(true);
    pgRelay.setDown(true);
    expect(await answer).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });
    await locker.query("COMMIT");
    // Redis back for the gateway; PostgreSQL not yet.
    await new Promise((r) => setTimeout(r, 1000));
    relay.setDown(false);
    const [run] = await eventually(async () => {
      const runs = await prisma.run.findMany({ where: { query, orgId: tenant.orgId } });
      return runs.length > 0 && runs;
    });
    // Past the time the workers would have queued it again and run it.
    await new Promise((r) => setTimeout(r, 8000));
    pgRelay.setDown(false);
    const ended = await prisma.run.findUniqueOrThrow({ where: { id: run!.id } });
    // Ended by the gateway (failed, unavailable) or, once claimed, by its cancel flag: never run, free.
    expect(["failed", "cancelled"]).toContain(ended.status);
    expect(ended).toMatchObject({ output: "", creditsUsed: 0, promptTokens: 0 });
    // The flag stays for a run the gateway ended; a worker that ended it so deleted it with its end.
    expect(await redis.exists(runCancelKey(stack.env.REDIS_PREFIX!, run!.id))).toBe(ended.status === "failed" ? 1 : 0);
    expect(await balance()).toBe(before);
  } finally {
    await locker.end().catch(() => {});
  }
});
