import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { createWidgetKey, eventually, rawExchange, readSse, runJson, stackWithTenant, logLinesOf, type LogLine, type Stack, type Tenant } from "@agentrun/testing";

// What the gateway's log says about a request, read from the process's output at LOG_LEVEL=info:
// the access line names the run a request started, tells an answer the client did not wait for
// from a success, and a request Node's parser refused leaves a line under the id it was answered with.
const ORIGIN = "https://shop.example";

const WIDGET_TOKEN_SECRET = "request-logs-test-secret-0123456789abcdef";
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), {
  stack: { workers: 1, memory: false, gatewayEnv: { LOG_LEVEL: "info", WIDGET_TOKEN_SECRET }, workerEnv: { LOG_LEVEL: "info" } },
});

/** The gateway's JSON log lines so far. */
const gatewayLines = (): LogLine[] => logLinesOf(stack.gateway);

/** The access line of the request whose X-Request-Id is `requestId`, once logged. */
const accessLine = (requestId: string) => eventually(async () => gatewayLines().find((l) => l.msg === "request" && l.requestId === requestId), { timeoutMs: 10_000, intervalMs: 50 });

const newRequestId = () => `logs-${randomUUID()}`;

describe("the start-up lines", () => {
  it("show the settings each process runs with, defaults included, secrets hidden", async () => {
    const gatewayStart = await eventually(async () => gatewayLines().find((l) => l.msg === "gateway listening"));
    expect(gatewayStart.settings).toMatchObject({ PORT: gatewayStart.port, LOG_LEVEL: "info", SSE_HEARTBEAT_MS: expect.any(Number), INTERNAL_TOKEN: "[hidden]", WIDGET_TOKEN_SECRET: "[hidden]" });
    const worker = stack.workers[0]!;
    const workerStart = await eventually(async () => logLinesOf(worker).find((l) => l.msg === "agent worker started"));
    expect(workerStart.settings).toMatchObject({ WORKER_CONCURRENCY: workerStart.concurrency, RUN_TIMEOUT_MS: expect.any(Number), INTERNAL_TOKEN: "[hidden]" });
    expect(stack.gateway.output()).not.toContain(WIDGET_TOKEN_SECRET);
  });
});

describe("the gateway's access line", () => {
  it("names the run and the task a POST /api/run started", async () => {
    const requestId = newRequestId();
    const res = await runJson(stack.gatewayUrl, { ...tenant.headers, "x-request-id": requestId }, { query: "hello there" });
    expect(res.status).toBe(200);
    expect(await accessLine(requestId)).toMatchObject({ method: "POST", path: "/api/run", status: 200, orgId: tenant.orgId, runId: res.body.run_id, taskId: res.body.task_id });
  });

  it("names the run a widget run started", async () => {
    const key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
    const requestId = newRequestId();
    const res = await fetch(`${stack.gatewayUrl}/api/v1/widget/run`, {
      method: "POST",
      headers: { "x-widget-key": key, origin: ORIGIN, "content-type": "application/json", "x-request-id": requestId },
      body: JSON.stringify({ query: "hi from the widget", stream: false }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { run_id: string; task_id: string };
    expect(await accessLine(requestId)).toMatchObject({ path: "/api/v1/widget/run", status: 200, runId: body.run_id, taskId: body.task_id });
  });

  it("names the run a repeated request (same Idempotency-Key) answers with", async () => {
    const headers = { ...tenant.headers, "idempotency-key": `key-${randomUUID()}` };
    const first = await runJson(stack.gatewayUrl, headers, { query: "once only" });
    expect(first.status).toBe(200);
    const requestId = newRequestId();
    const again = await runJson(stack.gatewayUrl, { ...headers, "x-request-id": requestId }, { query: "once only" });
    expect(again.body.run_id).toBe(first.body.run_id);
    expect(await accessLine(requestId)).toMatchObject({ status: 200, runId: first.body.run_id, taskId: first.body.task_id });
  });

  it("has no status and says abandoned for a stream:false request the client gave up on before any answer", async () => {
    const requestId = newRequestId();
    const gaveUp = fetch(`${stack.gatewayUrl}/api/run`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json", "x-request-id": requestId },
      body: JSON.stringify({ query: "[sleep:3000] too slow for this client", stream: false }),
      signal: AbortSignal.timeout(1000),
    });
    await expect(gaveUp).rejects.toThrow();
    const line = await accessLine(requestId);
    expect(line).toMatchObject({ path: "/api/run", abandoned: true });
    expect(line.runId).toMatch(/^run_/);
    expect(line).not.toHaveProperty("status");
  });

  it("keeps the status but says abandoned for an event stream the client dropped mid-way", async () => {
    const requestId = newRequestId();
    const res = await readSse(`${stack.gatewayUrl}/api/run`, {
      body: { query: "[sleep:200][chunks:20] dropped mid-way" },
      headers: { ...tenant.headers, "x-request-id": requestId },
      until: (e) => e.data.type === "text_chunk",
    });
    expect(res.status).toBe(200);
    expect(await accessLine(requestId)).toMatchObject({ status: 200, abandoned: true, runId: res.events[0]!.data.run_id });
  });

  it("says nothing of abandonment for an answer delivered whole", async () => {
    const requestId = newRequestId();
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "streamed whole [chunks:3]" }, headers: { ...tenant.headers, "x-request-id": requestId } });
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    const line = await accessLine(requestId);
    expect(line).toMatchObject({ status: 200 });
    expect(line).not.toHaveProperty("abandoned");
  });
});

describe("a request Node's HTTP parser refuses", () => {
  it("is logged with the X-Request-Id it was answered with, its status and the parser's code", async () => {
    const answer = await rawExchange(stack.gatewayUrl, "POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    const requestId = /\r\nX-Request-Id: (\S+)\r\n/i.exec(answer)?.[1];
    expect(requestId).toBeDefined();
    const line = await eventually(async () => gatewayLines().find((l) => l.requestId === requestId), { timeoutMs: 5000, intervalMs: 50 });
    expect(line).toMatchObject({ level: 30, status: 400, code: expect.stringMatching(/^HPE_/) });
  });

  it("logs an oversized head as 431", async () => {
    const answer = await rawExchange(stack.gatewayUrl, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    const requestId = /\r\nX-Request-Id: (\S+)\r\n/i.exec(answer)?.[1];
    const line = await eventually(async () => gatewayLines().find((l) => l.requestId === requestId), { timeoutMs: 5000, intervalMs: 50 });
    expect(line).toMatchObject({ status: 431, code: "HPE_HEADER_OVERFLOW" });
  });
});
