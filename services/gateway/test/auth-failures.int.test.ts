import { randomInt } from "node:crypto";
import { stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// TRUST_PROXY lets each test speak from an address of its own through X-Forwarded-For.
const LIMIT = 5;
let stack: Stack;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, tenant } = started), { stack: { workers: 0, gatewayEnv: { TRUST_PROXY: "true", AUTH_FAILURE_LIMIT: String(LIMIT) } }, tenant: { plan: "enterprise", rpmLimit: 100_000 } });

const newIp = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
const get = (ip: string, headers: Record<string, string>) => fetch(`${stack.gatewayUrl}/api/memory`, { headers: { ...headers, "x-forwarded-for": ip } });
const badKey = { authorization: "Bearer ar_live_not-a-real-key", "x-agent-id": "agt_whatever" };

describe("failed authentications per client address", () => {
  it("answers 401 up to the limit, then 429 with Retry-After to further failures from that address", async () => {
    const ip = newIp();
    for (let i = 0; i < LIMIT; i++) {
      const res = await get(ip, i % 2 ? badKey : {});
      expect(res.status).toBe(401);
      expect(((await res.json()) as any).error.code).toBe("unauthorized");
    }
    for (const headers of [badKey, {}]) {
      const res = await get(ip, headers);
      expect(res.status).toBe(429);
      expect(await res.json()).toEqual({ error: { code: "rate_limited", message: expect.stringMatching(/failed authentication/) } });
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(59);
      // Not an organization's limit: no X-RateLimit headers.
      expect(res.headers.get("x-ratelimit-limit")).toBeNull();
    }
  });

  it("never blocks a valid key, even from an address over its failure limit", async () => {
    const ip = newIp();
    for (let i = 0; i <= LIMIT; i++) await get(ip, badKey).then((r) => r.body?.cancel());
    expect((await get(ip, badKey)).status).toBe(429);
    const ok = await get(ip, tenant.headers);
    expect(ok.status).toBe(200);
  });

  it("counts each address on its own", async () => {
    const noisy = newIp();
    for (let i = 0; i <= LIMIT; i++) await get(noisy, badKey).then((r) => r.body?.cancel());
    expect((await get(noisy, badKey)).status).toBe(429);
    expect((await get(newIp(), badKey)).status).toBe(401);
  });

  it("counts an agent error after a valid key as no authentication failure", async () => {
    const ip = newIp();
    for (let i = 0; i < LIMIT + 2; i++) {
      const res = await get(ip, { ...tenant.headers, "x-agent-id": "agt_missing" });
      expect(res.status).toBe(404);
    }
    expect((await get(ip, badKey)).status).toBe(401);
  });
});
