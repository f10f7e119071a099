import http from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "@agentrun/logger";
import { createRedis, closeRedis } from "@agentrun/redis";
import { createRunQueue } from "@agentrun/queue";
import { SubscriberHub } from "@agentrun/events";
import { createTenant, readSse, testEnv, testPrisma, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { createApp } from "../src/app";
import { gatewayConfigSchema } from "../src/config";
import { createGatewayDeps } from "../src/create-deps";

// A gateway whose PostgreSQL and Redis work but whose run queue cannot take jobs (its BullMQ
// connection points nowhere): every accepted run must still end, with a terminal event.
let prisma: PrismaClient;
let tenant: Tenant;
let server: http.Server;
let url: string;
let close: () => Promise<void>;
const deadBull = createRedis({ url: "redis://127.0.0.1:1", role: "bullmq" });
// For the test of a gateway that cannot hear run events either (Redis went down after the
// request was admitted): its subscriber connection points nowhere too.
const deadSubscriber = createRedis({ url: "redis://127.0.0.1:1", role: "subscriber" });
let swapHub: (hub: SubscriberHub) => SubscriberHub;

beforeAll(async () => {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  prisma = testPrisma(databaseUrl);
  tenant = await createTenant(prisma, { credits: 10 });
  const config = gatewayConfigSchema.parse({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:queue-down`, LOG_LEVEL: "silent" });
  const made = createGatewayDeps(config, createLogger({ service: "gateway", level: "silent", pretty: false }));
  const queue = createRunQueue({ connection: deadBull, redisPrefix: config.REDIS_PREFIX });
  queue.on("error", () => {});
  made.deps.queue = queue;
  // POST /api/run reads the hub from its deps at each request.
  swapHub = (hub) => {
    const was = made.deps.hub;
    made.deps.hub = hub;
    return was;
  };
  close = async () => {
    await made.close();
    await queue.close().catch(() => {});
  };
  server = http.createServer(createApp(made.deps));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 30_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await close?.();
  await closeRedis(deadBull);
  await closeRedis(deadSubscriber);
  await prisma?.$disconnect();
});

async function balance(): Promise<number> {
  return (await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } })).creditBalance;
}

it("a streaming run that cannot be queued gets run_started, then run_failed unavailable; it is stored failed and refunded", async () => {
  const before = await balance();
  const res = await readSse(`${url}/api/run`, { headers: tenant.headers, body: { query: "hello", stream: true }, timeoutMs: 15_000 });
  expect(res.status).toBe(200);
  expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
  expect(res.events.map((e) => Number(e.id))).toEqual([1, 2]);
  const runId = res.events[0]!.data.run_id as string;
  expect(res.events[1]!.data).toMatchObject({ run_id: runId, error: { code: "unavailable" } });

  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "failed", errorCode: "unavailable", creditsUsed: 0 });
  const task = await prisma.task.findUniqueOrThrow({ where: { id: run.taskId } });
  expect(task).toMatchObject({ status: "failed", activeRunId: null });
  expect(await prisma.message.count({ where: { runId } })).toBe(1);
  expect(await balance()).toBe(before);
}, 20_000);

it("a streaming run that can be neither queued nor followed (Redis gone) still ends with run_failed at once", async () => {
  const liveHub = swapHub(new SubscriberHub(deadSubscriber));
  try {
    const t0 = Date.now();
    const res = await readSse(`${url}/api/run`, { headers: tenant.headers, body: { query: "nobody listening", stream: true }, timeoutMs: 15_000 });
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
    expect(res.events[1]!.data).toMatchObject({ seq: 2, error: { code: "unavailable" } });
    expect(Date.now() - t0).toBeLessThan(8000);
  } finally {
    swapHub(liveHub);
  }
}, 20_000);

it("a JSON run that cannot be queued answers 503 unavailable naming the run and its task, and the run is stored failed", async () => {
  const res = await fetch(`${url}/api/run`, {
    method: "POST",
    headers: { ...tenant.headers, "content-type": "application/json" },
    body: JSON.stringify({ query: "hello again", stream: false }),
    signal: AbortSignal.timeout(15_000),
  });
  expect(res.status).toBe(503);
  const { error } = (await res.json()) as { error: { code: string; details?: unknown } };
  const runs = await prisma.run.findMany({ where: { orgId: tenant.orgId, query: "hello again" } });
  expect(runs).toHaveLength(1);
  expect(runs[0]).toMatchObject({ status: "failed", errorCode: "unavailable" });
  // The client can tell which task holds the failed run (and its query), to retry elsewhere or clean up.
  expect(error).toMatchObject({ code: "unavailable", details: { run_id: runs[0]!.id, task_id: runs[0]!.taskId } });
}, 20_000);

it("a run that cannot be queued does not use up its Idempotency-Key", async () => {
  const send = (stream: boolean) =>
    fetch(`${url}/api/run`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json", "idempotency-key": `unqueued-${tenant.orgId}` },
      body: JSON.stringify({ query: "keyed", stream }),
      signal: AbortSignal.timeout(15_000),
    });
  const first = await send(false);
  expect(first.status).toBe(503);
  await first.arrayBuffer();
  expect(await prisma.idempotencyKey.count({ where: { orgId: tenant.orgId } })).toBe(0);
  // The retry is a new request: it starts (and, the queue being down, fails) a run of its own.
  const second = await readSse(`${url}/api/run`, { headers: { ...tenant.headers, "idempotency-key": `unqueued-${tenant.orgId}` }, body: { query: "keyed", stream: true }, timeoutMs: 15_000 });
  expect(second.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
  expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: "keyed" } })).toBe(2);
  expect(await prisma.idempotencyKey.count({ where: { orgId: tenant.orgId } })).toBe(0);
}, 30_000);
