import supertest from "supertest";
import type { Express } from "express";
import { createPrisma, type PrismaClient } from "@agentrun/db";
import { capturedLogger, createTenant, eventually, type LogLine, startPgRelay, testEnv, testPrisma, type PgRelay, type Tenant } from "@agentrun/testing";
import { createApp } from "../src/app";
import { gatewayConfigSchema } from "../src/config";
import { createGatewayDeps } from "../src/create-deps";
import { createApp as createMemoryApp } from "../../memory/src/app";

// What the gateway and the memory service write while their PostgreSQL is out of reach (a relay
// cut), under readiness probes and requests, and once it is back: one warning when it goes, one
// line with the outage's duration when it returns, rather than nothing but the requests' errors.
jest.setTimeout(60_000);

const gatewayLog = capturedLogger("debug");
const memoryLog = capturedLogger("debug");

let relay: PgRelay;
let direct: PrismaClient;
let memoryPrisma: PrismaClient;
let gateway: Express;
let memory: Express;
let closeGateway: () => Promise<void>;
let tenant: Tenant;
const TOKEN = "test-internal-token-0123456789";
/** Longer than the watch's own recheck while the database is down (DATABASE_RECHECK_MS, 5 s). */
const OUTAGE_MS = 6500;

beforeAll(async () => {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  relay = await startPgRelay(databaseUrl);
  direct = testPrisma(databaseUrl);
  tenant = await createTenant(direct);
  const made = createGatewayDeps(gatewayConfigSchema.parse({ DATABASE_URL: relay.url, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:db-outage-log`, INTERNAL_TOKEN: TOKEN }), gatewayLog.logger);
  closeGateway = made.close;
  gateway = createApp(made.deps);
  memoryPrisma = createPrisma({ databaseUrl: relay.url, poolSize: 2 });
  memory = createMemoryApp({ prisma: memoryPrisma, logger: memoryLog.logger, internalToken: TOKEN });
});

afterAll(async () => {
  await closeGateway?.();
  await memoryPrisma?.$disconnect();
  await direct?.$disconnect();
  await relay?.close();
});

const DOWN = "database unreachable: requests that need it fail with 503 until it is back";
const BACK = "database reachable again";
/** Readiness probes and requests that need the database, as a load balancer and clients send them. */
async function traffic(): Promise<void> {
  await supertest(gateway).get("/readyz");
  await supertest(gateway).get("/api/tasks").set(tenant.headers);
  await supertest(memory).get("/readyz");
  await supertest(memory).get(`/internal/memories?org_id=${tenant.orgId}`).set({ authorization: `Bearer ${TOKEN}` });
}

it("logs a database outage once when it begins and once when it ends, with its duration, in the gateway and the memory service", async () => {
  await traffic();
  expect((await supertest(memory).get("/readyz")).status).toBe(200);
  const from = { gateway: gatewayLog.lines.length, memory: memoryLog.lines.length };
  relay.setDown(true);
  // Probes and requests for a few seconds, past the watch's own recheck.
  const downUntil = Date.now() + OUTAGE_MS;
  while (Date.now() < downUntil) {
    await traffic();
    await new Promise((r) => setTimeout(r, 300));
  }
  expect((await supertest(memory).get("/readyz")).status).toBe(503);
  relay.setDown(false);
  // Seen by the next probe or the watch's recheck, whichever comes first: none are sent here.
  const seen = (lines: LogLine[], n: number) => lines.slice(n).some((l) => l.msg === BACK);
  await eventually(async () => seen(gatewayLog.lines, from.gateway) && seen(memoryLog.lines, from.memory), { timeoutMs: 10_000 }).catch(() => {});

  for (const [service, lines] of [["gateway", gatewayLog.lines.slice(from.gateway)], ["memory", memoryLog.lines.slice(from.memory)]] as const) {
    const count = (msg: string) => lines.filter((l) => l.msg === msg).length;
    expect({ service, down: count(DOWN), back: count(BACK) }).toEqual({ service, down: 1, back: 1 });
    expect(lines.find((l) => l.msg === DOWN)).toMatchObject({ level: 40, err: expect.stringMatching(/\S/) });
    const back = lines.find((l) => l.msg === BACK)!;
    expect(back).toMatchObject({ level: 30, was: "unavailable" });
    expect(back.downForMs).toBeGreaterThan(OUTAGE_MS - 1000);
  }
});
