import { request as httpRequest } from "node:http";
import type { PrismaClient } from "@agentrun/db";
import { createTenant, createWidgetKey, startStack, testEnv, testPrisma, type Stack } from "@agentrun/testing";

// The gateway's own origin for widget requests without Origin, as the Host header names it (the
// gateway's TRUST_PROXY is off here; behind a trusted proxy: widget-limits.int.test.ts).
// fetch() cannot set Host, so these requests go through node:http.
const ORIGIN = "https://shop.example";
const LAN = "http://gateway.lan:8080";

let stack: Stack;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** A new widget key, for a new tenant's agent, that allows `origins`. */
async function widgetKeyAllowing(origins: string[]): Promise<string> {
  const tenant = await createTenant(prisma);
  return createWidgetKey(prisma, tenant.agentId, origins);
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(path: string, init: { method?: string; headers: Record<string, string>; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, stack.gatewayUrl), { method: init.method ?? "GET", headers: init.headers }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject).end(init.body);
  });
}

describe("a widget GET without Origin", () => {
  it("counts as from the gateway's own origin, also without Fetch Metadata (plain http on a LAN name)", async () => {
    const key = await widgetKeyAllowing([ORIGIN, LAN]);
    const started = await send("/api/v1/widget/run", {
      method: "POST",
      headers: { "x-widget-key": key, origin: ORIGIN, "content-type": "application/json" },
      body: JSON.stringify({ query: "hello over plain http", stream: false }),
    });
    expect(started.status).toBe(200);
    const run = JSON.parse(started.body);
    // A page at http://gateway.lan:8080 served by the gateway: browsers send its same-origin GETs
    // with neither Origin nor Sec-Fetch-Site (no Fetch Metadata to plain-http hosts but localhost).
    const events = (host: string, extra: Record<string, string> = {}) =>
      send(`/api/v1/widget/tasks/${run.task_id}/runs/${run.run_id}/events`, { headers: { host, "x-widget-key": key, "x-visitor-token": run.visitor_token, ...extra } });

    const same = await events("gateway.lan:8080");
    expect(same.status).toBe(200);
    expect(same.headers["access-control-allow-origin"]).toBe(LAN);
    expect(same.body).toContain('"type":"run_completed"');
    expect((await events("gateway.lan:8080", { "sec-fetch-site": "same-origin" })).status).toBe(200);
    // Fetch Metadata that says the request is not same-origin, or a host the key does not list.
    expect((await events("gateway.lan:8080", { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await events("other.lan:8080")).status).toBe(403);
    // Without TRUST_PROXY, a forwarded host is not taken for the gateway's own.
    expect((await events("other.lan:8080", { "x-forwarded-host": "gateway.lan:8080" })).status).toBe(403);
  });

  it("is refused on other methods unless Sec-Fetch-Site says same-origin", async () => {
    const key = await widgetKeyAllowing([LAN]);
    const post = (extra: Record<string, string>) =>
      send("/api/v1/widget/run", { method: "POST", headers: { host: "gateway.lan:8080", "x-widget-key": key, "content-type": "application/json", ...extra }, body: "{}" });
    expect((await post({})).status).toBe(403);
    // Past the origin check, the empty body is refused.
    expect((await post({ "sec-fetch-site": "same-origin" })).status).toBe(400);
  });
});
