import type { PrismaClient } from "@agentrun/db";
import { generateWidgetKey } from "@agentrun/api-keys";
import { createTenant, createWidgetKey, eventually, readSse, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";
import { VisitorTokens } from "../src/widget/visitor-token";

// The widget gateway through HTTP against the real services: keys and origins, CORS, visitor
// sessions and their isolation, credits and memory scoping. Limits are in widget-limits.int.test.ts,
// the script and the demo page in widget-assets.int.test.ts.
const ORIGIN = "https://shop.example";
const SECRET = "widget-gateway-test-secret-0123456789abcdef";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let key: string;

// Every request of this file comes from 127.0.0.1: lift the per-address limit out of the way.
stackWithTenant((started) => ({ stack, prisma, tenant } = started), {
  stack: { workers: 1, gatewayEnv: { WIDGET_TOKEN_SECRET: SECRET, WIDGET_RPM_PER_IP: "10000", WIDGET_RPM_PER_KEY: "10000" } },
  tenant: { instructions: "You are the shop assistant." },
});
beforeAll(async () => {
  key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
});

const widgetUrl = (path: string) => `${stack.gatewayUrl}/api/v1/widget${path}`;
const headersFor = (widgetKey: string, token?: string, extra: Record<string, string> = {}) => ({
  "x-widget-key": widgetKey,
  origin: ORIGIN,
  ...(token ? { "x-visitor-token": token } : {}),
  ...extra,
});

/** `POST /widget/run` with `stream: false`. */
async function runJson(body: object, headers: Record<string, string> = headersFor(key)) {
  const res = await fetch(widgetUrl("/run"), { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ ...body, stream: false }) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** A visitor: its token after a first completed run, and that run. */
async function newVisitor(query = "hello") {
  const res = await runJson({ query });
  expect(res.status).toBe(200);
  return { token: res.body.visitor_token as string, run: res.body };
}

const visitorIdOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).visitor_id as string;

describe("POST /api/v1/widget/run from an allowed origin", () => {
  it("streams like /api/run, with CORS headers and a new visitor token in X-Visitor-Token", async () => {
    const res = await readSse(widgetUrl("/run"), { body: { query: "hi there [chunks:3]" }, headers: headersFor(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(res.headers.get("vary")).toMatch(/Origin/);
    expect(res.headers.get("access-control-expose-headers")).toMatch(/X-Visitor-Token/);
    // The page can read the ping interval, which its idle watchdog is set from.
    expect(res.headers.get("access-control-expose-headers")).toMatch(/X-Heartbeat-Interval-Ms/);
    expect(res.headers.get("x-heartbeat-interval-ms")).toBe("14000");
    const token = res.headers.get("x-visitor-token")!;
    expect(token).toMatch(/^v1\.[\w-]+\.[\w-]+$/);
    const types = res.events.map((e) => e.data.type);
    expect(types).toEqual(["run_started", "text_chunk", "text_chunk", "text_chunk", "run_completed"]);
    expect(res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: hi there");

    const visitorId = visitorIdOf(token);
    expect(visitorId).toMatch(/^vis_/);
    const run = await prisma.run.findUniqueOrThrow({ where: { id: res.events[0]!.data.run_id }, include: { task: true } });
    expect(run.orgId).toBe(tenant.orgId);
    expect(run.task.visitorId).toBe(visitorId);
    expect(run.task.userId).toBe(`visitor:${visitorId}`);
    expect(run.context).toEqual({ user_id: `visitor:${visitorId}` });
  });

  it("answers JSON with visitor_token, and the same visitor continues its task", async () => {
    const first = await runJson({ query: "first question" });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: "completed", output: "Echo: first question", tool_calls: [] });
    expect(first.body.visitor_token).toBe(first.headers.get("x-visitor-token"));
    const token = first.body.visitor_token as string;

    const second = await runJson({ query: "[history]", task_id: first.body.task_id }, headersFor(key, token));
    expect(second.status).toBe(200);
    expect(second.body.task_id).toBe(first.body.task_id);
    expect(second.body.output).toBe("first question");
    // The session is renewed on every answer, for the same visitor.
    expect(visitorIdOf(second.body.visitor_token)).toBe(visitorIdOf(token));
  });

  it("charges the agent's organization", async () => {
    const before = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
    const { run } = await newVisitor("what does it cost");
    const after = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
    expect(run.credits_used).toBeGreaterThanOrEqual(1);
    expect(before.creditBalance - after.creditBalance).toBe(run.credits_used);
    const ledger = await prisma.creditLedgerEntry.findMany({ where: { orgId: tenant.orgId, runId: run.run_id } });
    expect(ledger.reduce((sum, e) => sum - e.amount, 0)).toBe(run.credits_used);
  });

  it("refuses fields other than query, task_id and stream", async () => {
    const res = await runJson({ query: "x", context: { user_id: "someone-else" } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect((await runJson({ query: "" })).status).toBe(400);
    expect((await runJson({ query: "x".repeat(32_001) })).status).toBe(400);
  });
});

describe("widget keys and origins", () => {
  it("refuses a disallowed or missing Origin with 403 and no CORS headers", async () => {
    const evil = await runJson({ query: "hi" }, { "x-widget-key": key, origin: "https://evil.example" });
    expect(evil.status).toBe(403);
    expect(evil.body.error.code).toBe("forbidden");
    expect(evil.headers.get("access-control-allow-origin")).toBeNull();
    const missing = await runJson({ query: "hi" }, { "x-widget-key": key });
    expect(missing.status).toBe(403);
    expect(missing.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("refuses a missing, malformed, unknown or revoked key with 401", async () => {
    for (const headers of [{ origin: ORIGIN }, headersFor("pk_short"), headersFor(generateWidgetKey())]) {
      const res = await runJson({ query: "hi" }, headers);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
      // No key allows any origin: nothing for the page to read.
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
    }
    const revoked = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
    expect((await runJson({ query: "hi" }, headersFor(revoked))).status).toBe(200);
    await prisma.widgetKey.update({ where: { key: revoked }, data: { revokedAt: new Date() } });
    // Within the auth cache's TTL (under a second), on every instance.
    await eventually(async () => (await runJson({ query: "hi" }, headersFor(revoked))).status === 401, { timeoutMs: 1500, intervalMs: 100 });
    // The revoked key's own origins can read the refusal; other origins cannot.
    const fromAllowed = await runJson({ query: "hi" }, headersFor(revoked));
    expect(fromAllowed.status).toBe(401);
    expect(fromAllowed.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(fromAllowed.headers.get("access-control-expose-headers")).toMatch(/X-Request-Id/);
    expect(fromAllowed.headers.get("vary")).toMatch(/Origin/);
    const fromOther = await runJson({ query: "hi" }, { "x-widget-key": revoked, origin: "https://evil.example" });
    expect(fromOther.status).toBe(401);
    expect(fromOther.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("is not an API key: the API routes still want a Bearer key", async () => {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/tasks`, { headers: { ...headersFor(key), "x-agent-id": tenant.agentId } });
    expect(res.status).toBe(401);
  });

  it("answers preflights for allowed origins only", async () => {
    const preflight = (path: string, origin: string) =>
      fetch(widgetUrl(path), { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-widget-key,x-visitor-token" } });
    for (const path of ["/run", "/tasks/task_1/runs/run_1/events"]) {
      const ok = await preflight(path, ORIGIN);
      expect(ok.status).toBe(204);
      expect(ok.headers.get("access-control-allow-origin")).toBe(ORIGIN);
      expect(ok.headers.get("vary")).toMatch(/Origin/);
      expect(ok.headers.get("access-control-allow-headers")).toBe("Content-Type, X-Widget-Key, X-Visitor-Token, Last-Event-ID, Idempotency-Key, X-Request-Id");
      expect(ok.headers.get("access-control-allow-methods")).toMatch(/POST/);
      expect(Number(ok.headers.get("access-control-max-age"))).toBeGreaterThan(0);

      const refused = await preflight(path, "https://evil.example");
      expect(refused.status).toBe(403);
      expect(refused.headers.get("access-control-allow-origin")).toBeNull();
      expect(refused.headers.get("access-control-allow-headers")).toBeNull();
    }
    // The OpenAPI document names the same headers.
    const doc = (await (await fetch(`${stack.gatewayUrl}/api/openapi.json`)).json()) as any;
    for (const path of ["/api/v1/widget/run", "/api/v1/widget/tasks/{task_id}/runs/{run_id}/events"]) {
      expect(doc.paths[path].options.responses["204"].headers["Access-Control-Allow-Headers"].description).toBe("Content-Type, X-Widget-Key, X-Visitor-Token, Last-Event-ID, Idempotency-Key, X-Request-Id.");
    }
  });

  it("answers 402 with CORS headers when the organization has no credits", async () => {
    const broke = await createTenant(prisma, { credits: 0 });
    const brokeKey = await createWidgetKey(prisma, broke.agentId, [ORIGIN]);
    const res = await runJson({ query: "hi" }, headersFor(brokeKey));
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe("insufficient_credits");
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(res.headers.get("x-visitor-token")).toBeNull();
  });

  it("reserves the agent's base price: 402 when the balance does not cover it", async () => {
    const priced = await createTenant(prisma, { credits: 5, pricing: { base: 10, per_tool_call: 1, per_1k_tokens: 1 } });
    const pricedKey = await createWidgetKey(prisma, priced.agentId, [ORIGIN]);
    const res = await runJson({ query: "hi" }, headersFor(pricedKey));
    expect(res.status).toBe(402);
    expect(res.body.error.code).toBe("insufficient_credits");
    expect((await prisma.organization.findUniqueOrThrow({ where: { id: priced.orgId } })).creditBalance).toBe(5);
  });

  it("answers 404 in the contract's shape for an unknown widget route", async () => {
    const res = await fetch(widgetUrl("/tasks"), { headers: headersFor(key) });
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.code).toBe("not_found");
  });
});

describe("visitor sessions", () => {
  it("keeps visitors apart: no continuing or reading another visitor's task", async () => {
    const a = await newVisitor("secret of A");
    const b = await newVisitor("hello from B");
    const continued = await runJson({ query: "let me in", task_id: a.run.task_id }, headersFor(key, b.token));
    expect(continued.status).toBe(403);
    expect(continued.body.error.code).toBe("forbidden");
    // A refusal renews no token, nor mints one for a visitor who sent none.
    expect(continued.headers.get("x-visitor-token")).toBeNull();
    const tokenless = await runJson({ query: "let me in", task_id: a.run.task_id }, headersFor(key));
    expect([tokenless.status, tokenless.headers.get("x-visitor-token")]).toEqual([403, null]);

    const eventsPath = `/tasks/${a.run.task_id}/runs/${a.run.run_id}/events`;
    const asB = await readSse(widgetUrl(eventsPath), { headers: headersFor(key, b.token) });
    expect(asB.status).toBe(403);
    expect(asB.events).toEqual([]);
    const anonymous = await readSse(widgetUrl(eventsPath), { headers: headersFor(key) });
    expect(anonymous.status).toBe(401);

    const asA = await readSse(widgetUrl(eventsPath), { headers: headersFor(key, a.token, { "last-event-id": "1" }) });
    expect(asA.status).toBe(200);
    expect(asA.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(asA.events[0]!.data.seq).toBe(2);
    expect(asA.events.at(-1)!.data.type).toBe("run_completed");
    expect(asA.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("")).toBe("Echo: secret of A");

    // After the terminal event: 204, so that EventSource stops reconnecting.
    const ended = await fetch(widgetUrl(eventsPath), { headers: headersFor(key, a.token, { "last-event-id": String(asA.events.at(-1)!.data.seq) }) });
    expect(ended.status).toBe(204);
    expect(ended.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    // A malformed cursor is 400 before the task is looked up, even on another visitor's task.
    for (const [query, cursor] of [["", { "last-event-id": "x" }], ["?after=abc", {}]] as const) {
      const res = await fetch(widgetUrl(`${eventsPath}${query}`), { headers: headersFor(key, b.token, cursor) });
      expect(res.status).toBe(400);
    }
  });

  it("re-attaches to a run in progress with Last-Event-ID, missing and repeating nothing", async () => {
    const partial = await readSse(widgetUrl("/run"), { body: { query: "[sleep:100][chunks:8] slow answer" }, headers: headersFor(key), until: (e) => e.data.type === "text_chunk" });
    const token = partial.headers.get("x-visitor-token")!;
    const { run_id, task_id } = partial.events[0]!.data;
    const lastSeq = partial.events.at(-1)!.data.seq as number;
    const rest = await readSse(widgetUrl(`/tasks/${task_id}/runs/${run_id}/events`), { headers: headersFor(key, token, { "last-event-id": String(lastSeq) }) });
    expect(rest.events.map((e) => e.data.seq)).toEqual(rest.events.map((_, i) => lastSeq + 1 + i));
    const text = [...partial.events, ...rest.events].filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("");
    expect(text).toBe("Echo: slow answer");
    expect(rest.events.at(-1)!.data.type).toBe("run_completed");
  });

  it("refuses tampered, expired and other-key tokens with 401", async () => {
    const { token } = await newVisitor();
    const [v, payload, sig] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, visitor_id: "vis_someone_else" })).toString("base64url");
    const keyRow = await prisma.widgetKey.findUniqueOrThrow({ where: { key } });
    const expired = new VisitorTokens(SECRET, 60, () => Date.now() - 3_600_000).sign(claims.visitor_id, keyRow.id);
    const otherKey = new VisitorTokens(SECRET, 60).sign(claims.visitor_id, "wk_other");
    const wrongSecret = new VisitorTokens(`${SECRET}-not-it`, 60).sign(claims.visitor_id, keyRow.id);
    for (const bad of [`${v}.${forged}.${sig}`, `${v}.${payload}.${sig.slice(2)}`, expired, otherKey, wrongSecret, "garbage"]) {
      const res = await runJson({ query: "hi" }, headersFor(key, bad));
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
    }
    // A token minted for one widget key does not open a session on another.
    const second = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
    expect((await runJson({ query: "hi" }, headersFor(second, token))).status).toBe(401);
  });

  it("scopes memories to the visitor", async () => {
    const a = await newVisitor("hi, I am A");
    const saved = await runJson({ query: '[call:memory_save {"content":"likes jazz"}]' }, headersFor(key, a.token));
    expect(saved.status).toBe(200);
    expect(saved.body.tool_calls[0]).toMatchObject({ tool: "memory", action: "save", result: { saved: true } });
    const b = await newVisitor("hi, I am B");

    const promptOfA = await runJson({ query: "[echo-system]" }, headersFor(key, a.token));
    expect(promptOfA.body.task_id).not.toBe(saved.body.task_id);
    expect(promptOfA.body.output).toContain("likes jazz");
    const promptOfB = await runJson({ query: "[echo-system]" }, headersFor(key, b.token));
    expect(promptOfB.body.output).toBe("You are the shop assistant.");
  });
});
