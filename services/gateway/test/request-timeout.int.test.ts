import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { createWidgetKey, rawExchange, rawHead, readSse, runJson, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// REQUEST_TIMEOUT_MS bounds how long a request may take to arrive, headers and body; not how long
// its answer may last. A short one here (Node's own default is 300 s).
const REQUEST_TIMEOUT_MS = 1000;
const ORIGIN = "https://shop.example";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), {
  stack: { workers: 1, memory: false, gatewayEnv: { REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), WIDGET_RPM_PER_IP: "10000" } },
});

/** Sends `raw` and nothing more; the answer, which must come (and the connection close) within 10 s. */
const stalled = (raw: string) => rawExchange(stack.gatewayUrl, raw, { timeoutMs: 10_000 });

function expect408(answer: string): void {
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(/^HTTP\/1\.1 408 /);
  expect(head).toMatch(/\r\nx-request-id: req_[0-9a-f]{32}\r\n/i);
  expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
  expect(JSON.parse(body!)).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
}

describe("a request that does not arrive whole in time", () => {
  it("is answered 408 in the error shape when its body stops short of its Content-Length", async () => {
    const head = rawHead("POST", "/api/run", { ...tenant.headers, "content-type": "application/json", "content-length": "100" });
    const query = `stalled ${randomUUID()}`;
    expect408(await stalled(`${head}{"query":"${query}`));
    expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: { contains: query } } })).toBe(0);
  });

  it("is answered 408 when its chunked body stops, or its headers never end", async () => {
    const head = rawHead("POST", "/api/tasks", { ...tenant.headers, "content-type": "application/json", "transfer-encoding": "chunked" });
    expect408(await stalled(`${head}5\r\n{"tit\r\n`));
    expect408(await stalled(`GET /api/tasks HTTP/1.1\r\nhost: x\r\nauthorization: ${tenant.headers.authorization}\r\n`));
  });

  it("is answered 408 on the widget's route, which needs no secret key to reach its body", async () => {
    const key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
    const head = rawHead("POST", "/api/v1/widget/run", { "x-widget-key": key, origin: ORIGIN, "content-type": "application/json", "content-length": "100" });
    expect408(await stalled(`${head}{"query":"st`));
  });
});

describe("an answer that lasts longer than the request timeout", () => {
  // Each about 3 s of run (chunks × sleep): three times the timeout.
  it("streams a run to its end", async () => {
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:250][chunks:12] long stream" }, headers: tenant.headers });
    expect(res.status).toBe(200);
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    const { task_id, run_id } = res.events[0]!.data;
    const replay = await readSse(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`, { headers: tenant.headers });
    expect(replay.events.map((e) => e.id)).toEqual(res.events.map((e) => e.id));
  });

  it("follows a run in progress to its end, and waits for it with stream: false", async () => {
    const waited = runJson(stack.gatewayUrl, tenant.headers, { query: "[sleep:250][chunks:12] long wait" });
    const started = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:250][chunks:12] long follow" }, headers: tenant.headers, until: (e) => e.data.type === "run_started" });
    const { task_id, run_id } = started.events[0]!.data;
    const followed = await readSse(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`, { headers: tenant.headers });
    expect(followed.events.at(-1)!.data.type).toBe("run_completed");
    expect(await waited).toMatchObject({ status: 200, body: { status: "completed" } });
  });
});
