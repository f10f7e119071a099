import { stackWithTenant, createTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { ERRORS_TABLE_STACK, expectError, requestsOf } from "./errors-table.fixture";

// One test per row of the contract's error table, through HTTP against the real services (the 400
// rows are in errors-table-400.int.test.ts).
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), ERRORS_TABLE_STACK);
const { call, postJson } = requestsOf(() => ({ stack, tenant }));

describe("401 unauthorized", () => {
  it.each([
    ["missing", {}],
    ["not a bearer token", { authorization: "Basic dXNlcjpwYXNz" }],
    ["unknown", { authorization: "Bearer ar_live_unknownkey0000000000000000" }],
  ])("%s key", async (_, auth) => {
    await expectError(await call("/api/memory", { headers: { ...auth, "x-agent-id": tenant.agentId } }), 401, "unauthorized");
  });

  it("revoked key", async () => {
    const t = await createTenant(prisma);
    await prisma.apiKey.update({ where: { id: t.keyId }, data: { revokedAt: new Date() } });
    await expectError(await call("/api/memory", { headers: t.headers }), 401, "unauthorized");
  });
});

it("402 insufficient_credits when the balance is not positive", async () => {
  const broke = await createTenant(prisma, { credits: 0 });
  await expectError(await postJson("/api/run", { query: "x", stream: false }, broke.headers), 402, "insufficient_credits");
});

describe("403", () => {
  it("forbidden: the agent belongs to another organization", async () => {
    const other = await createTenant(prisma);
    await expectError(await call("/api/memory", { headers: { ...tenant.headers, "x-agent-id": other.agentId } }), 403, "forbidden");
  });

  it("forbidden: the task belongs to another organization", async () => {
    const other = await createTenant(prisma);
    const first = await postJson("/api/run", { query: "x", stream: false }, other.headers);
    const { task_id } = (await first.json()) as any;
    await expectError(await postJson("/api/run", { query: "x", task_id }), 403, "forbidden");
  });
  // https_required: see https-required.int.test.ts.
});

describe("404", () => {
  it("agent_not_found", async () => {
    await expectError(await call("/api/memory", { headers: { ...tenant.headers, "x-agent-id": "agt_nope" } }), 404, "agent_not_found");
  });

  it("task_not_found", async () => {
    await expectError(await postJson("/api/run", { query: "x", task_id: "task_nope" }), 404, "task_not_found");
  });

  it("memory_not_found", async () => {
    await expectError(await call("/api/memory/mem_nope", { method: "DELETE" }), 404, "memory_not_found");
  });

  it.each([
    ["an unknown route outside /api, without a key", "GET", "/nope", {}],
    ["an unknown route under /api", "GET", "/api/nope", undefined],
    ["an unknown route under /api/v1", "GET", "/api/v1/nope", undefined],
    ["a known path with a method it does not serve", "PUT", "/api/run", undefined],
    ["DELETE on a collection", "DELETE", "/api/memory", undefined],
    // Express would answer OPTIONS itself (200 text/plain) on a path it knows.
    ["OPTIONS on a known path", "OPTIONS", "/api/run", undefined],
    ["OPTIONS on a public path", "OPTIONS", "/api/openapi.json", {}],
  ])("not_found: %s", async (_, method, path, headers) => {
    const body = await expectError(await call(path, { method, headers: headers ?? tenant.headers }), 404, "not_found");
    expect(body.error.message).toContain(method);
  });

  it.each([
    ["an unknown route", "GET", "/api/nope/"],
    ["OPTIONS", "OPTIONS", "/api/nope/"],
  ])("not_found names at most 200 characters of a long path: %s", async (_, method, prefix) => {
    const path = prefix + "x".repeat(8000);
    const body = await expectError(await call(`${path}?q=1`, { method }), 404, "not_found");
    expect(body.error.message).toBe(`No route for ${method} ${path.slice(0, 200)}….`);
  });
});

it("409 run_in_progress: a run is requested on a task whose run is still going", async () => {
  const slow = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:10] slow" }, headers: tenant.headers });
  await slow.waitFor((e) => e.type === "run_started");
  const taskId = slow.events[0].task_id;
  await expectError(await postJson("/api/run", { query: "again", task_id: taskId }), 409, "run_in_progress");
  expect((await slow.result).events.at(-1)?.data.type).toBe("run_completed");
});

it("413 payload_too_large: a body over BODY_LIMIT_BYTES (1 MiB)", async () => {
  const big = JSON.stringify({ query: "x".repeat(1024 * 1024 + 10) });
  const body = await expectError(await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: big }), 413, "payload_too_large");
  expect(body.error.message).toMatch(/1048576/);
});

describe("415 unsupported_media_type", () => {
  it.each([
    ["text/plain", "query=x"],
    ["application/x-www-form-urlencoded", "query=x"],
    ["application/json; charset=latin1", '{"query":"x"}'],
  ])("%s", async (type, body) => {
    await expectError(await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": type }, body }), 415, "unsupported_media_type");
  });

  it("a body without a content type", async () => {
    await expectError(await call("/api/run", { method: "POST", body: Buffer.from('{"query":"x"}') }), 415, "unsupported_media_type");
  });
});

it("429 rate_limited: over the plan's requests per minute", async () => {
  const free = await createTenant(prisma, { plan: "free" });
  for (let i = 0; i < 10; i++) expect((await call("/api/memory", { headers: free.headers })).status).toBe(200);
  const res = await call("/api/memory", { headers: free.headers });
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  await expectError(res, 429, "rate_limited");
});

// 500 internal_error and 503 unavailable: see errors-outages.int.test.ts.
