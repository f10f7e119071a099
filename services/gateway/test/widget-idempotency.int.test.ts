import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { createWidgetKey, readSse, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// Idempotency-Key on the widget gateway: a message sent again after its answer was lost gets the
// run the first one started, with a token for that run's visitor.
const ORIGIN = "https://shop.example";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let key: string;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), {
  stack: { workers: 1, gatewayEnv: { WIDGET_RPM_PER_IP: "10000", WIDGET_RPM_PER_KEY: "10000" } },
  tenant: { instructions: "You are the shop assistant." },
});
beforeAll(async () => {
  key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
});

const widgetUrl = (path: string) => `${stack.gatewayUrl}/api/v1/widget${path}`;
const visitorIdOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).visitor_id as string;

/** `POST /widget/run` with `stream: false`, the Idempotency-Key `idem` and, if given, a visitor token. */
async function runJson(body: object, idem: string, opts: { token?: string; widgetKey?: string } = {}) {
  const headers: Record<string, string> = { "x-widget-key": opts.widgetKey ?? key, origin: ORIGIN, "content-type": "application/json", "idempotency-key": idem };
  if (opts.token) headers["x-visitor-token"] = opts.token;
  const res = await fetch(widgetUrl("/run"), { method: "POST", headers, body: JSON.stringify({ ...body, stream: false }) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

const runsOfTask = (taskId: string) => prisma.run.count({ where: { taskId } });

describe("POST /api/v1/widget/run with an Idempotency-Key", () => {
  it("answers a new visitor's repeat with the first run and a token for that run's visitor", async () => {
    const idem = `k-${randomUUID()}`;
    const first = await runJson({ query: "hello once" }, idem);
    expect(first.status).toBe(200);
    // The answer was lost: the page still has no token and sends the same message again.
    const again = await runJson({ query: "hello once" }, idem);
    expect(again.status).toBe(200);
    expect(again.body.run_id).toBe(first.body.run_id);
    expect(again.body.output).toBe("Echo: hello once");
    expect(visitorIdOf(again.body.visitor_token)).toBe(visitorIdOf(first.body.visitor_token));
    expect(visitorIdOf(again.headers.get("x-visitor-token")!)).toBe(visitorIdOf(first.body.visitor_token));
    expect(await runsOfTask(first.body.task_id)).toBe(1);
    // With the token (its headers had arrived), and streamed: the same run's events from the start.
    const streamed = await readSse(widgetUrl("/run"), {
      body: { query: "hello once" },
      headers: { "x-widget-key": key, origin: ORIGIN, "idempotency-key": idem, "x-visitor-token": first.body.visitor_token },
    });
    expect(streamed.status).toBe(200);
    expect(streamed.events.map((e) => e.data.seq)).toEqual(streamed.events.map((_, i) => i + 1));
    expect(streamed.events[0]!.data).toMatchObject({ type: "run_started", run_id: first.body.run_id });
    expect(streamed.events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id: first.body.run_id });
    expect(await runsOfTask(first.body.task_id)).toBe(1);
  });

  it("keeps a visitor's keys to that visitor: another visitor, or a request without a token, starts its own run", async () => {
    const owner = (await runJson({ query: "first" }, `k-${randomUUID()}`)).body.visitor_token as string;
    const idem = `k-${randomUUID()}`;
    const mine = await runJson({ query: "mine" }, idem, { token: owner });
    expect(mine.status).toBe(200);
    expect((await runJson({ query: "mine" }, idem, { token: owner })).body.run_id).toBe(mine.body.run_id);
    const other = (await runJson({ query: "someone else" }, `k-${randomUUID()}`)).body.visitor_token as string;
    for (const token of [other, undefined]) {
      const res = await runJson({ query: "mine" }, idem, { token });
      expect(res.status).toBe(200);
      expect(res.body.run_id).not.toBe(mine.body.run_id);
      expect(visitorIdOf(res.body.visitor_token)).not.toBe(visitorIdOf(owner));
    }
    // The same key with another message is the caller's mistake.
    const changed = await runJson({ query: "not mine" }, idem, { token: owner });
    expect(changed.status).toBe(409);
    expect(changed.body.error.code).toBe("idempotency_conflict");
    // Another widget key of the same organization has keys of its own.
    const elsewhere = await runJson({ query: "mine" }, idem, { token: owner, widgetKey: await createWidgetKey(prisma, tenant.agentId, [ORIGIN]) });
    expect(elsewhere.status).toBe(401); // the token is the first widget key's
    const fresh = await runJson({ query: "first" }, idem, { widgetKey: await createWidgetKey(prisma, tenant.agentId, [ORIGIN]) });
    expect(fresh.status).toBe(200);
    expect(await runsOfTask(mine.body.task_id)).toBe(1);
  });

  it("finds a new visitor's first run when its repeat carries the token that run started", async () => {
    const idem = `k-${randomUUID()}`;
    const first = await runJson({ query: "hello with headers" }, idem);
    // The answer's headers (and the token) arrived, the stream did not.
    const again = await runJson({ query: "hello with headers" }, idem, { token: first.body.visitor_token });
    expect(again.status).toBe(200);
    expect(again.body.run_id).toBe(first.body.run_id);
    const changed = await runJson({ query: "another message" }, idem, { token: first.body.visitor_token });
    expect(changed.status).toBe(409);
    expect(changed.body.error.code).toBe("idempotency_conflict");
    expect(await runsOfTask(first.body.task_id)).toBe(1);
  });

  it("repeats a new visitor's first request without a token only for 10 minutes, and only until that visitor goes on", async () => {
    const spent = (res: { status: number; headers: Headers; body: any }) => {
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe("idempotency_conflict");
      expect(res.headers.get("x-visitor-token")).toBeNull();
    };
    // The visitor went on with its token: a repeat without one is not the visitor's.
    const idem = `k-${randomUUID()}`;
    const first = await runJson({ query: "my secret plans" }, idem);
    const next = await runJson({ query: "more", task_id: first.body.task_id }, `k-${randomUUID()}`, { token: first.body.visitor_token });
    expect(next.status).toBe(200);
    spent(await runJson({ query: "my secret plans" }, idem));
    // The visitor's own repeat, with its token, still finds its run.
    expect((await runJson({ query: "my secret plans" }, idem, { token: first.body.visitor_token })).body.run_id).toBe(first.body.run_id);

    // Past the widget's 10 minutes of resends.
    const late = `k-${randomUUID()}`;
    const once = await runJson({ query: "hello there" }, late);
    expect((await runJson({ query: "hello there" }, late)).body.run_id).toBe(once.body.run_id);
    await prisma.idempotencyKey.updateMany({ where: { runId: once.body.run_id }, data: { createdAt: new Date(Date.now() - 11 * 60_000) } });
    spent(await runJson({ query: "hello there" }, late));
    expect(await runsOfTask(once.body.task_id)).toBe(1);
  });

  it("does not use up the key of a refused request, and refuses a malformed key", async () => {
    const idem = `k-${randomUUID()}`;
    const refused = await runJson({ query: "continue", task_id: "task_00000000000000000000000000" }, idem);
    expect(refused.status).toBe(404);
    const next = await runJson({ query: "start over" }, idem);
    expect(next.status).toBe(200);
    expect(next.body.output).toBe("Echo: start over");
    const malformed = await runJson({ query: "hi" }, "has spaces");
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe("invalid_request");
  });

  it("keeps visitors' keys out of reach of the organization's API requests, which share the table", async () => {
    const idem = `k-${randomUUID()}`;
    const first = await runJson({ query: "mine alone" }, idem);
    expect(first.status).toBe(200);
    const stored = await prisma.idempotencyKey.findFirstOrThrow({ where: { orgId: tenant.orgId, runId: first.body.run_id } });
    expect(stored.key).toContain(idem);
    // An API request naming the stored key gets neither the visitor's run nor its slot.
    const res = await fetch(`${stack.gatewayUrl}/api/run`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json", "idempotency-key": stored.key },
      body: JSON.stringify({ query: "mine alone", stream: false }),
    });
    const body = (await res.json()) as any;
    expect(body.run_id).toBeUndefined();
    expect(res.status).toBe(400);
    expect(body.error.code).toBe("invalid_request");
  });
});
