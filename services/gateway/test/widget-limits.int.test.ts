import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { generateWidgetKey } from "@agentrun/api-keys";
import { createWidgetKey, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// Widget limits per client address and per widget key, apart from the organization's API limit.
// TRUST_PROXY lets the test speak from several addresses through X-Forwarded-For; this stack also
// checks the gateway's own origin behind a trusted proxy (without one: widget-origin.int.test.ts).
const ORIGIN = "https://shop.example";
const PER_IP = 3;
const PER_KEY = 5;
const AUTH_FAILURES = 4;

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, gatewayEnv: { WIDGET_RPM_PER_IP: String(PER_IP), WIDGET_RPM_PER_KEY: String(PER_KEY), AUTH_FAILURE_LIMIT: String(AUTH_FAILURES), TRUST_PROXY: "true" } }, tenant: { plan: "free" } });

const widgetKey = () => createWidgetKey(prisma, tenant.agentId, [ORIGIN]);

/** A widget request that passes the limits and stops at validation (400): no run is started. */
const hit = (key: string, ip: string) =>
  fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "POST", headers: { "x-widget-key": key, origin: ORIGIN, "x-forwarded-for": ip, "content-type": "application/json" }, body: "{}" });

describe("widget limits", () => {
  it("limits each client address, then each widget key, with 429 and Retry-After", async () => {
    const key = await widgetKey();
    for (let i = 0; i < PER_IP; i++) {
      const res = await hit(key, "203.0.113.1");
      expect(res.status).toBe(400);
      expect(res.headers.get("x-ratelimit-limit")).toBe(String(PER_IP));
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(PER_IP - 1 - i));
    }
    const byIp = await hit(key, "203.0.113.1");
    expect(byIp.status).toBe(429);
    expect(((await byIp.json()) as any).error).toMatchObject({ code: "rate_limited", message: expect.stringMatching(/address/) });
    expect(Number(byIp.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // The page can read the refusal and its headers.
    expect(byIp.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(byIp.headers.get("access-control-expose-headers")).toMatch(/Retry-After/);

    // Other addresses go on until the key's own budget (the refused request did not count) is spent.
    expect((await hit(key, "203.0.113.2")).status).toBe(400);
    expect((await hit(key, "203.0.113.2")).status).toBe(400);
    const byKey = await hit(key, "203.0.113.3");
    expect(byKey.status).toBe(429);
    expect(((await byKey.json()) as any).error.message).toMatch(/widget/);
    expect(byKey.headers.get("x-ratelimit-limit")).toBe(String(PER_KEY));
    expect(Number(byKey.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    // Another key from a fresh address is not affected.
    expect((await hit(await widgetKey(), "203.0.113.4")).status).toBe(400);
  });

  it("limits refused widget requests per client address: unknown keys, other origins, bad or missing tokens, refused preflights", async () => {
    const key = await widgetKey();
    const post = (ip: string, headers: Record<string, string>) =>
      fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "POST", headers: { origin: ORIGIN, "x-forwarded-for": ip, "content-type": "application/json", ...headers }, body: "{}" });
    const preflight = (ip: string, origin: string) =>
      fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "OPTIONS", headers: { origin, "x-forwarded-for": ip, "access-control-request-method": "POST" } });
    const cases: [string, number, (i: number) => Promise<Response>][] = [
      ["198.51.100.1", 401, () => post("198.51.100.1", { "x-widget-key": generateWidgetKey() })],
      ["198.51.100.2", 403, (i) => post("198.51.100.2", { "x-widget-key": key, origin: `https://r${i}.example` })],
      ["198.51.100.3", 401, () => post("198.51.100.3", { "x-widget-key": key, "x-visitor-token": "v1.a.b" })],
      ["198.51.100.4", 403, (i) => preflight("198.51.100.4", `https://p${i}.example`)],
      // A run's events without the visitor token they need: refused before the widget limits.
      ["198.51.100.7", 401, () => fetch(`${stack.gatewayUrl}/api/v1/widget/tasks/task_1/runs/run_1/events`, { headers: { "x-widget-key": key, origin: ORIGIN, "x-forwarded-for": "198.51.100.7" } })],
    ];
    for (const [ip, status, request] of cases) {
      for (let i = 0; i < AUTH_FAILURES; i++) expect({ ip, i, status: (await request(i)).status }).toEqual({ ip, i, status });
      const limited = await request(AUTH_FAILURES);
      expect({ ip, status: limited.status }).toEqual({ ip, status: 429 });
      expect(((await limited.json()) as any).error).toMatchObject({ code: "rate_limited", message: expect.stringMatching(/failed authentication/) });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
    // The same addresses with a valid key and origin are not blocked (only failures are refused).
    expect((await hit(key, "198.51.100.1")).status).toBe(400);
    const allowed = await fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "OPTIONS", headers: { origin: ORIGIN, "x-forwarded-for": "198.51.100.4", "access-control-request-method": "POST" } });
    expect(allowed.status).toBe(204);
  });

  it("lets an allowed origin read the refusals of its revoked key, 429 included; not those of an unknown key", async () => {
    const key = await widgetKey();
    await prisma.widgetKey.update({ where: { key }, data: { revokedAt: new Date() } });
    const post = (ip: string, widgetKey: string) =>
      fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "POST", headers: { "x-widget-key": widgetKey, origin: ORIGIN, "x-forwarded-for": ip, "content-type": "application/json" }, body: "{}" });
    for (const [ip, widgetKey, cors] of [
      ["198.51.100.5", key, ORIGIN],
      ["198.51.100.6", generateWidgetKey(), null],
    ] as const) {
      for (let i = 0; i < AUTH_FAILURES; i++) {
        const res = await post(ip, widgetKey);
        expect({ ip, status: res.status, cors: res.headers.get("access-control-allow-origin") }).toEqual({ ip, status: 401, cors });
      }
      // Still counted as failed authentications: beyond the limit, 429.
      const limited = await post(ip, widgetKey);
      expect({ ip, status: limited.status, cors: limited.headers.get("access-control-allow-origin") }).toEqual({ ip, status: 429, cors });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      if (cors) expect(limited.headers.get("access-control-expose-headers")).toMatch(/Retry-After/);
    }
  });

  it("answers the preflight of an origin whose only key is revoked, so that the page's request gets its 401", async () => {
    const origin = `https://revoked-${randomUUID()}.example`;
    const key = await createWidgetKey(prisma, tenant.agentId, [origin]);
    await prisma.widgetKey.update({ where: { key }, data: { revokedAt: new Date() } });
    const preflight = await fetch(`${stack.gatewayUrl}/api/v1/widget/run`, {
      method: "OPTIONS",
      headers: { origin, "x-forwarded-for": "198.51.100.8", "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-widget-key" },
    });
    expect({ status: preflight.status, cors: preflight.headers.get("access-control-allow-origin") }).toEqual({ status: 204, cors: origin });
    const res = await fetch(`${stack.gatewayUrl}/api/v1/widget/run`, {
      method: "POST",
      headers: { "x-widget-key": key, origin, "x-forwarded-for": "198.51.100.8", "content-type": "application/json" },
      body: JSON.stringify({ query: "hi" }),
    });
    expect({ status: res.status, cors: res.headers.get("access-control-allow-origin") }).toEqual({ status: 401, cors: origin });
  });

  it("reports the longer wait when one request uses up both limits", async () => {
    const key = await widgetKey();
    // The key's window starts 2 s before the address's: it frees up 2 s sooner.
    for (const ip of ["203.0.113.50", "203.0.113.51"]) expect((await hit(key, ip)).status).toBe(400);
    await new Promise((r) => setTimeout(r, 2000));
    let last: Response | undefined;
    for (let i = 0; i < PER_IP; i++) expect((last = await hit(key, "203.0.113.52")).status).toBe(400);
    // Both windows are full now (3 of 3 for the address, 5 of 5 for the key): the headers are the
    // address's, whose wait is the longer one, and the next request is refused for as long.
    expect([last!.headers.get("x-ratelimit-limit"), last!.headers.get("x-ratelimit-remaining")]).toEqual([String(PER_IP), "0"]);
    const reset = Number(last!.headers.get("x-ratelimit-reset"));
    expect(reset).toBeGreaterThanOrEqual(59);
    const refused = await hit(key, "203.0.113.52");
    expect(refused.status).toBe(429);
    expect(Math.abs(Number(refused.headers.get("retry-after")) - reset)).toBeLessThanOrEqual(1);
  });

  it("does not let a request refused by an exhausted widget key use up the address's budget", async () => {
    const exhausted = await widgetKey();
    for (let i = 0; i < PER_KEY; i++) expect((await hit(exhausted, `203.0.113.${20 + i}`)).status).toBe(400);
    // One visitor refused by that key more times than its address's own limit...
    const refused = await hit(exhausted, "203.0.113.30");
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as any).error.message).toMatch(/widget/);
    expect(refused.headers.get("x-ratelimit-limit")).toBe(String(PER_KEY));
    for (let i = 0; i < PER_IP; i++) expect((await hit(exhausted, "203.0.113.30")).status).toBe(429);
    // ...keeps its whole budget for another widget.
    const other = await hit(await widgetKey(), "203.0.113.30");
    expect(other.status).toBe(400);
    expect(other.headers.get("x-ratelimit-remaining")).toBe(String(PER_IP - 1));
  });

  it("counts an IPv6 client as its /64, and an IPv4-mapped address as the IPv4 one", async () => {
    const key = await widgetKey();
    // Addresses that differ only in their last 64 bits share one budget.
    for (const ip of ["2001:db8:7:7::1", "2001:db8:7:7:a:b:c:d", "2001:db8:7:7:ffff:ffff:ffff:fffe"]) expect({ ip, status: (await hit(key, ip)).status }).toEqual({ ip, status: 400 });
    const limited = await hit(key, "2001:db8:7:7::9");
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as any).error.message).toMatch(/address/);
    // Another /64 is another client.
    expect((await hit(key, "2001:db8:7:8::1")).status).toBe(400);

    const mapped = await widgetKey();
    for (const ip of ["203.0.113.40", "::ffff:203.0.113.40", "203.0.113.40"]) expect({ ip, status: (await hit(mapped, ip)).status }).toEqual({ ip, status: 400 });
    expect((await hit(mapped, "::ffff:203.0.113.40")).status).toBe(429);

    // Failed authentications are counted the same way.
    const unknownKey = (ip: string) =>
      fetch(`${stack.gatewayUrl}/api/v1/widget/run`, { method: "POST", headers: { "x-widget-key": generateWidgetKey(), origin: ORIGIN, "x-forwarded-for": ip, "content-type": "application/json" }, body: "{}" });
    for (let i = 0; i < AUTH_FAILURES; i++) expect((await unknownKey(`2001:db8:9:9::${i + 1}`)).status).toBe(401);
    expect((await unknownKey("2001:db8:9:9:1234::1")).status).toBe(429);
  });

  it("does not count widget requests against the organization's API limit", async () => {
    const res = await fetch(`${stack.gatewayUrl}/api/tasks`, { headers: tenant.headers });
    expect(res.status).toBe(200);
    // The free plan's 10 per minute, untouched by the widget traffic above.
    expect(res.headers.get("x-ratelimit-limit")).toBe("10");
    expect(res.headers.get("x-ratelimit-remaining")).toBe("9");
  });
});

describe("the gateway's own origin behind a trusted proxy", () => {
  it("is the scheme and host the proxy forwards, for a GET without Origin", async () => {
    const key = await widgetKey();
    const ip = "203.0.113.50";
    const run = await fetch(`${stack.gatewayUrl}/api/v1/widget/run`, {
      method: "POST",
      headers: { "x-widget-key": key, origin: ORIGIN, "x-forwarded-for": ip, "content-type": "application/json" },
      body: JSON.stringify({ query: "hello", stream: false }),
    });
    expect(run.status).toBe(200);
    const { task_id, run_id, visitor_token } = (await run.json()) as any;
    // The page at https://shop.example is served by the gateway behind a TLS-terminating proxy:
    // the browser's same-origin GET has no Origin, and the gateway sees another Host.
    const events = await fetch(`${stack.gatewayUrl}/api/v1/widget/tasks/${task_id}/runs/${run_id}/events`, {
      headers: { "x-widget-key": key, "x-visitor-token": visitor_token, "sec-fetch-site": "same-origin", "x-forwarded-for": ip, "x-forwarded-proto": "https", "x-forwarded-host": "shop.example" },
    });
    expect(events.status).toBe(200);
    expect(events.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect(await events.text()).toContain('"type":"run_completed"');
  });
});
