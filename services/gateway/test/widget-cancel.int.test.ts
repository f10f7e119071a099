import type { PrismaClient } from "@agentrun/db";
import { createWidgetKey, readSse, stackWithTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";

// The widget's Stop button through HTTP against the real services: a visitor cancels a run of its
// own task, as the API's `POST …/cancel` does, and no one else's.
const ORIGIN = "https://shop.example";
const SLOW = "[sleep:300][chunks:30] a long answer to stop";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let key: string;

// Every request of this file comes from 127.0.0.1: lift the per-address limit out of the way.
stackWithTenant((started) => ({ stack, prisma, tenant } = started), {
  stack: { workers: 1, gatewayEnv: { WIDGET_RPM_PER_IP: "10000", WIDGET_RPM_PER_KEY: "10000" } },
});
beforeAll(async () => {
  key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
});

const widgetUrl = (path: string, prefix = "/api/v1/widget") => `${stack.gatewayUrl}${prefix}${path}`;
const headersFor = (token?: string, extra: Record<string, string> = {}) => ({ "x-widget-key": key, origin: ORIGIN, ...(token ? { "x-visitor-token": token } : {}), ...extra });
const cancelPath = (run: { task_id: string; run_id: string }) => `/tasks/${run.task_id}/runs/${run.run_id}/cancel`;
const visitorIdOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).visitor_id as string;

/** `POST …/cancel` of the widget gateway (`body`: sent as JSON). */
async function cancel(path: string, headers: Record<string, string>, body?: unknown, prefix?: string) {
  const res = await fetch(widgetUrl(path, prefix), {
    method: "POST",
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** A visitor: its token after a first completed run (`stream: false`), and that run. */
async function newVisitor(query = "hello") {
  const res = await fetch(widgetUrl("/run"), { method: "POST", headers: { ...headersFor(), "content-type": "application/json" }, body: JSON.stringify({ query, stream: false }) });
  const body = (await res.json()) as any;
  expect(res.status).toBe(200);
  return { token: body.visitor_token as string, run: body };
}

/** A slow run of the visitor of `token`, streaming; resolved once its answer has begun. */
async function slowRun(token: string) {
  const stream = watchSse(widgetUrl("/run"), { body: { query: SLOW }, headers: headersFor(token) });
  await stream.waitFor((e) => e.type === "text_chunk");
  const { run_id, task_id } = stream.events[0];
  return { stream, run: { run_id: run_id as string, task_id: task_id as string } };
}

describe("POST /api/v1/widget/tasks/{task_id}/runs/{run_id}/cancel", () => {
  it("stops the visitor's run: 202 with the run and a renewed token, the stream ends with run_cancelled, the run is cancelled", async () => {
    const a = await newVisitor("hi, I am A");
    const b = await newVisitor("hi, I am B");
    const { stream, run } = await slowRun(a.token);

    // Another visitor gets what the events route gives it for this task (403), and stops nothing.
    const events = await readSse(widgetUrl(`/tasks/${run.task_id}/runs/${run.run_id}/events`), { headers: headersFor(b.token) });
    const asB = await cancel(cancelPath(run), headersFor(b.token));
    expect([asB.status, asB.body.error.code]).toEqual([events.status, "forbidden"]);
    expect(asB.status).toBe(403);
    expect(asB.headers.get("x-visitor-token")).toBeNull();
    // Without a visitor token: 401, as the events route answers.
    const anonymous = await cancel(cancelPath(run), headersFor());
    expect([anonymous.status, anonymous.body.error.code]).toEqual([401, "unauthorized"]);
    expect(anonymous.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: run.run_id }, select: { status: true, cancelRequestedAt: true } })).toEqual({ status: "running", cancelRequestedAt: null });

    const res = await cancel(cancelPath(run), headersFor(a.token));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ run_id: run.run_id, task_id: run.task_id, query: SLOW });
    // As the cancel found it, or already ended by its worker.
    expect(["running", "cancelled"]).toContain(res.body.status);
    expect(Object.keys(res.body).sort()).toEqual(["completed_at", "created_at", "credits_used", "duration_ms", "output", "query", "run_id", "started_at", "status", "task_id", "visitor_token"]);
    expect(res.body.visitor_token).toBe(res.headers.get("x-visitor-token"));
    expect(visitorIdOf(res.body.visitor_token)).toBe(visitorIdOf(a.token));
    // CORS and the widget limits, as on POST /run.
    expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(res.headers.get("access-control-expose-headers")).toMatch(/X-Visitor-Token/);
    expect(res.headers.get("vary")).toMatch(/Origin/);
    expect(res.headers.get("x-ratelimit-limit")).toBe("10000");

    const done = await stream.result;
    expect(done.events.at(-1)!.data).toMatchObject({ type: "run_cancelled", run_id: run.run_id });
    const stored = await prisma.run.findUniqueOrThrow({ where: { id: run.run_id } });
    expect(stored.status).toBe("cancelled");
    expect(stored.cancelRequestedAt).not.toBeNull();
    // What was streamed before the stop is the run's output.
    const streamed = done.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("");
    expect(streamed.length).toBeGreaterThan(0);
    expect(stored.output).toBe(streamed);
    expect(streamed.length).toBeLessThan("Echo: a long answer to stop".length);
  });

  it("answers a run that has already ended 202, unchanged, also under /api/widget", async () => {
    const a = await newVisitor("already answered");
    const before = await prisma.run.findUniqueOrThrow({ where: { id: a.run.run_id } });
    for (const prefix of ["/api/v1/widget", "/api/widget"]) {
      const res = await cancel(cancelPath(a.run), headersFor(a.token), undefined, prefix);
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ run_id: a.run.run_id, status: "completed", output: "Echo: already answered", completed_at: a.run.completed_at, credits_used: a.run.credits_used });
      expect(res.body.visitor_token).toEqual(expect.any(String));
    }
    const after = await prisma.run.findUniqueOrThrow({ where: { id: a.run.run_id } });
    expect(after).toEqual(before);
  });

  it("refuses a body or a query parameter as the API's cancel does, and unknown runs and tasks", async () => {
    const a = await newVisitor("nothing to send");
    const withBody = await cancel(cancelPath(a.run), headersFor(a.token), { reason: "changed my mind" });
    expect([withBody.status, withBody.body.error.code]).toEqual([400, "invalid_request"]);
    expect(JSON.stringify(withBody.body.error)).toContain("reason");
    const api = await fetch(`${stack.gatewayUrl}/api/v1/tasks/${a.run.task_id}/runs/${a.run.run_id}/cancel`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json" },
      body: JSON.stringify({ reason: "changed my mind" }),
    });
    expect(((await api.json()) as any).error).toEqual(withBody.body.error);
    expect((await cancel(cancelPath(a.run), headersFor(a.token), {})).status).toBe(202);
    expect((await cancel(`${cancelPath(a.run)}?force=true`, headersFor(a.token))).status).toBe(400);

    const unknownRun = await cancel(cancelPath({ task_id: a.run.task_id, run_id: "run_nope" }), headersFor(a.token));
    expect([unknownRun.status, unknownRun.body.error.code]).toEqual([404, "run_not_found"]);
    const unknownTask = await cancel(cancelPath({ task_id: "task_nope", run_id: a.run.run_id }), headersFor(a.token));
    expect([unknownTask.status, unknownTask.body.error.code]).toEqual([404, "task_not_found"]);
    // A task of the API (no visitor's) is no visitor's own.
    const apiRun = (await (await fetch(`${stack.gatewayUrl}/api/run`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: JSON.stringify({ query: "from the API", stream: false }) })).json()) as any;
    expect((await cancel(cancelPath(apiRun), headersFor(a.token))).status).toBe(403);
  });

  it("refuses a disallowed origin as the other widget routes do, and answers its preflight for allowed origins only", async () => {
    const a = await newVisitor("from elsewhere");
    const evil = await cancel(cancelPath(a.run), { ...headersFor(a.token), origin: "https://evil.example" });
    expect([evil.status, evil.body.error.code]).toEqual([403, "forbidden"]);
    expect(evil.headers.get("access-control-allow-origin")).toBeNull();
    const run = await fetch(widgetUrl("/run"), { method: "POST", headers: { ...headersFor(a.token), origin: "https://evil.example", "content-type": "application/json" }, body: JSON.stringify({ query: "x" }) });
    expect([run.status, run.headers.get("access-control-allow-origin")]).toEqual([evil.status, null]);

    const preflight = (origin: string) =>
      fetch(widgetUrl(cancelPath(a.run)), { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "x-widget-key,x-visitor-token" } });
    const ok = await preflight(ORIGIN);
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(ok.headers.get("access-control-allow-methods")).toMatch(/POST/);
    expect(ok.headers.get("access-control-allow-headers")).toMatch(/X-Visitor-Token/);
    const refused = await preflight("https://evil.example");
    expect([refused.status, refused.headers.get("access-control-allow-origin")]).toEqual([403, null]);
  });
});
