import { createTenant, freePort, startService, testEnv, testPrisma, waitForOk, type ServiceProcess, type Tenant } from "@agentrun/testing";
import pg from "pg";
import { dropDatabase, ensureDatabase, migrateDeploy, type PrismaClient } from "@agentrun/db";
import { generateWidgetKey } from "@agentrun/api-keys";

// Gateways whose dependencies are unreachable or broken answer in the contract's shape, quickly.
let prisma: PrismaClient;
let tenant: Tenant;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await prisma?.$disconnect();
});

async function gateway(env: Record<string, string>): Promise<{ url: string; proc: ServiceProcess }> {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const port = await freePort();
  const proc = startService("gateway", { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:outage-${port}`, PORT: String(port), ...env });
  started.push(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/healthz`, proc);
  return { url, proc };
}

async function expectQuickError(url: string, init: RequestInit, status: number, code: string, message?: RegExp) {
  const t0 = Date.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  expect(Date.now() - t0).toBeLessThan(3000);
  expect(res.status).toBe(status);
  expect(res.headers.get("x-request-id")).toBeTruthy();
  const text = await res.text();
  const body = JSON.parse(text);
  expect(body).toEqual({ error: { code, message: message ? expect.stringMatching(message) : expect.any(String) } });
  expect(text).not.toMatch(/\bat .+:\d+:\d+/);
  return res;
}

it("503 unavailable when Redis is unreachable: fails closed, never hangs", async () => {
  const { url } = await gateway({ REDIS_URL: "redis://127.0.0.1:1" });
  for (let i = 0; i < 3; i++) {
    await expectQuickError(`${url}/api/memory`, { headers: tenant.headers }, 503, "unavailable");
    await expectQuickError(`${url}/api/run`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"query":"x"}' }, 503, "unavailable");
  }
  // A failed authentication is counted in Redis too, so it cannot be answered either.
  await expectQuickError(`${url}/api/memory`, {}, 503, "unavailable");
  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  expect((await fetch(`${url}/readyz`)).status).toBe(503);
});

it("503 unavailable when PostgreSQL is unreachable", async () => {
  const { url } = await gateway({ DATABASE_URL: "postgresql://postgres@127.0.0.1:1/agentrun" });
  for (let i = 0; i < 3; i++) {
    await expectQuickError(`${url}/api/memory`, { headers: tenant.headers }, 503, "unavailable");
    await expectQuickError(`${url}/api/run`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"query":"x"}' }, 503, "unavailable");
  }
});

it("500 internal_error with a generic message on an unexpected failure, logged with the request id", async () => {
  // A database whose API keys cannot be read: every authenticated request fails with an error
  // that is no outage, nor a schema out of date (that is 503: see readiness.int.test.ts).
  const broken = new URL(testEnv().databaseUrl);
  broken.pathname = `${broken.pathname}_broken`;
  // A database of a previous run that did not get to drop it goes first; this one goes whatever fails.
  await dropDatabase(broken.toString());
  try {
    await ensureDatabase(broken.toString());
    await migrateDeploy(broken.toString());
    const admin = new pg.Client({ connectionString: broken.toString() });
    await admin.connect();
    try {
      await admin.query(`
        CREATE TABLE test_keys_shape (LIKE api_keys);
        CREATE FUNCTION test_broken_keys() RETURNS SETOF test_keys_shape LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'api keys are broken'; END $$;
        DROP TABLE api_keys CASCADE;
        CREATE VIEW api_keys AS SELECT * FROM test_broken_keys();`);
    } finally {
      await admin.end();
    }
    const { url, proc } = await gateway({ DATABASE_URL: broken.toString() });
    const requestId = `req-test-500-${Date.now()}`;
    await expectQuickError(`${url}/api/memory`, { headers: { ...tenant.headers, "x-request-id": requestId } }, 500, "internal_error", /^An unexpected error occurred\.$/);
    // The gateway logs it (as JSON, with the stack) under the request's id.
    await new Promise((r) => setTimeout(r, 200));
    const line = proc.output().split("\n").find((l) => l.includes(requestId) && l.includes("request failed"));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: expect.anything(), requestId, code: "internal_error", err: { stack: expect.any(String) } });
    await proc.stop();
  } finally {
    await dropDatabase(broken.toString());
  }
});

it("503 of a widget request whose key lookup fails carries CORS headers, so that the page can read it", async () => {
  const { url } = await gateway({ DATABASE_URL: "postgresql://postgres@127.0.0.1:1/agentrun" });
  const origin = "https://shop.example";
  const res = await expectQuickError(`${url}/api/v1/widget/run`, {
    method: "POST", headers: { "x-widget-key": generateWidgetKey(), origin, "content-type": "application/json" }, body: '{"query":"x","stream":false}',
  }, 503, "unavailable");
  expect(res.headers.get("access-control-allow-origin")).toBe(origin);
  expect(res.headers.get("access-control-expose-headers")).toMatch(/Retry-After/);
});
