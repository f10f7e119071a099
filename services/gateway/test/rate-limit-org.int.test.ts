import { readSse, startStack, testEnv, testPrisma, createTenant, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { Redis } from "ioredis";

// Two gateway processes on the same Redis prefix: the limit is one per organization, not per instance.
let stack: Stack;
let secondUrl: string;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  ({ url: secondUrl } = await stack.addGateway());
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

// An endpoint that needs only the gateway and PostgreSQL, so that nothing but the limiter can refuse.
const get = (base: string, t: Tenant, path = "/api/tasks?limit=1") => fetch(`${base}${path}`, { headers: t.headers });
const header = (res: Response, name: string) => res.headers.get(name);
const num = (res: Response, name: string) => Number(res.headers.get(name));

describe("per-organization rate limit", () => {
  it("admits exactly the free plan's 10 requests out of 25 concurrent ones spread over two instances", async () => {
    const tenant = await createTenant(prisma, { plan: "free" });
    const responses = await Promise.all(Array.from({ length: 25 }, (_, i) => get(i % 2 ? secondUrl : stack.gatewayUrl, tenant)));
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok).toHaveLength(10);
    expect(limited).toHaveLength(15);

    // Each admitted request saw its own place in the window: remaining 9, 8, …, 0.
    expect(ok.map((r) => num(r, "x-ratelimit-remaining")).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const r of responses) expect(header(r, "x-ratelimit-limit")).toBe("10");
    for (const r of ok) {
      const reset = num(r, "x-ratelimit-reset");
      if (num(r, "x-ratelimit-remaining") > 0) expect(reset).toBe(0);
      else expect(reset).toBeGreaterThanOrEqual(59);
    }
    for (const r of limited) {
      expect(header(r, "x-ratelimit-remaining")).toBe("0");
      const retryAfter = num(r, "retry-after");
      expect(retryAfter).toBeGreaterThanOrEqual(59);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(num(r, "x-ratelimit-reset")).toBe(retryAfter);
      expect(header(r, "x-request-id")).toBeTruthy();
      expect(await r.json()).toEqual({ error: { code: "rate_limited", message: expect.any(String) } });
    }
    for (const r of ok) await r.body?.cancel();
  });

  it("counts per organization: another organization's requests are not limited by it", async () => {
    const busy = await createTenant(prisma, { plan: "free" });
    const other = await createTenant(prisma, { plan: "free" });
    await Promise.all(Array.from({ length: 10 }, () => get(stack.gatewayUrl, busy).then((r) => r.body?.cancel())));
    expect((await get(secondUrl, busy)).status).toBe(429);
    const res = await get(secondUrl, other);
    expect(res.status).toBe(200);
    expect(header(res, "x-ratelimit-remaining")).toBe("9");
  });

  it("uses the plan's figure, and the organization's own figure on the enterprise plan", async () => {
    for (const [opts, limit] of [
      [{ plan: "starter" }, "60"],
      [{ plan: "pro" }, "300"],
      [{ plan: "enterprise", rpmLimit: 4321 }, "4321"],
      // rpm_limit counts only on the enterprise plan.
      [{ plan: "free", rpmLimit: 5000 }, "10"],
    ] as const) {
      const t = await createTenant(prisma, opts);
      const res = await get(stack.gatewayUrl, t);
      expect(res.status).toBe(200);
      expect(header(res, "x-ratelimit-limit")).toBe(limit);
      expect(header(res, "x-ratelimit-remaining")).toBe(String(Number(limit) - 1));
      expect(header(res, "x-ratelimit-reset")).toBe("0");
    }
  });

  it("puts the headers on every authenticated response: errors after authentication and event streams", async () => {
    const t = await createTenant(prisma, { plan: "starter" });
    const invalid = await fetch(`${stack.gatewayUrl}/api/run`, { method: "POST", headers: { ...t.headers, "content-type": "application/json" }, body: "{}" });
    expect(invalid.status).toBe(400);
    expect(header(invalid, "x-ratelimit-remaining")).toBe("59");
    const unknown = await get(stack.gatewayUrl, t, "/api/no-such-route");
    expect(unknown.status).toBe(404);
    expect(header(unknown, "x-ratelimit-remaining")).toBe("58");
    const stream = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "x" }, headers: t.headers });
    expect(stream.status).toBe(200);
    expect(stream.events.at(-1)?.data.type).toBe("run_completed");
    expect(stream.headers.get("x-ratelimit-limit")).toBe("60");
    expect(stream.headers.get("x-ratelimit-remaining")).toBe("57");
    expect(stream.headers.get("x-ratelimit-reset")).toBe("0");

    // Not counted and no headers: a request that failed authentication belongs to no organization.
    const anonymous = await fetch(`${stack.gatewayUrl}/api/memory`);
    expect(anonymous.status).toBe(401);
    expect(header(anonymous, "x-ratelimit-limit")).toBeNull();
  });

  it("reports the window on the agent check's refusals (400, 404, 403) without counting them", async () => {
    const t = await createTenant(prisma, { plan: "free" });
    const other = await createTenant(prisma, { plan: "free" });
    const refusals: [number, Record<string, string>][] = [
      [400, { authorization: t.headers.authorization! }],
      [404, { ...t.headers, "x-agent-id": "agt_missing" }],
      [403, { ...t.headers, "x-agent-id": other.agentId }],
    ];
    const expectRefusals = async (remaining: string, minReset: number) => {
      for (const [status, headers] of refusals) {
        const res = await fetch(`${secondUrl}/api/tasks?limit=1`, { headers });
        expect({ status: res.status, limit: header(res, "x-ratelimit-limit"), remaining: header(res, "x-ratelimit-remaining") }).toEqual({ status, limit: "10", remaining });
        expect(num(res, "x-ratelimit-reset")).toBeGreaterThanOrEqual(minReset);
        expect(header(res, "retry-after")).toBeNull();
      }
    };
    await expectRefusals("10", 0);
    expect(header(await get(stack.gatewayUrl, t), "x-ratelimit-remaining")).toBe("9");
    await expectRefusals("9", 0);

    // A full window: the agent check still comes first, and its refusal tells how long to wait.
    for (let i = 0; i < 9; i++) expect((await get(stack.gatewayUrl, t)).status).toBe(200);
    await expectRefusals("0", 59);
    expect((await get(stack.gatewayUrl, t)).status).toBe(429);
    const log = new Redis(stack.env.REDIS_URL!);
    try {
      expect(await log.zcard(`${stack.env.REDIS_PREFIX}:rl:org:${t.orgId}`)).toBe(10);
    } finally {
      log.disconnect();
    }
  });

  it("does not count refused requests, and each /api/v1 request once", async () => {
    const t = await createTenant(prisma, { plan: "free" });
    for (let i = 0; i < 10; i++) await get(stack.gatewayUrl, t, "/api/v1/memory?user_id=u1").then((r) => r.body?.cancel());
    for (let i = 0; i < 5; i++) expect((await get(secondUrl, t)).status).toBe(429);
    const log = new Redis(stack.env.REDIS_URL!);
    try {
      expect(await log.zcard(`${stack.env.REDIS_PREFIX}:rl:org:${t.orgId}`)).toBe(10);
    } finally {
      log.disconnect();
    }
  });
});
