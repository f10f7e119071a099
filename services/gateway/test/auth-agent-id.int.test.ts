import request from "supertest";
import { capturedLogger, createTenant, testEnv, type Tenant } from "@agentrun/testing";
import { createApp } from "../src/app";
import { gatewayConfigSchema } from "../src/config";
import { createGatewayDeps } from "../src/create-deps";
import type { GatewayDeps } from "../src/deps";

// The real app on the test database and Redis, its log lines collected: an API key sent where the
// agent id belongs must appear neither in the answer nor in the log.
let deps: GatewayDeps;
let close: () => Promise<void>;
let app: ReturnType<typeof createApp>;
let tenant: Tenant;
const { logger, lines } = capturedLogger("info");

beforeAll(async () => {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const config = gatewayConfigSchema.parse({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:agent-id`, LOG_LEVEL: "info" });
  ({ deps, close } = createGatewayDeps(config, logger));
  tenant = await createTenant(deps.prisma);
  app = createApp(deps);
}, 30_000);

afterAll(async () => {
  await close?.();
});

beforeEach(() => {
  lines.length = 0;
});

describe("X-Agent-Id holding an API key", () => {
  it.each([
    ["the caller's own key", () => tenant.apiKey],
    ["a key with a Bearer prefix", () => `Bearer ${tenant.apiKey}`],
  ])("answers 404 agent_not_found without repeating %s, in the answer or the log", async (_, agentId) => {
    const sent = agentId();
    const res = await request(app).get("/api/tasks").set("authorization", `Bearer ${tenant.apiKey}`).set("x-agent-id", sent);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: { code: "agent_not_found", message: "No agent has the id given in X-Agent-Id; it looks like an API key, which belongs in Authorization." },
    });
    expect(lines.some((l) => JSON.stringify(l).includes("agent_not_found"))).toBe(true);
    const secret = tenant.apiKey.slice("ar_live_".length);
    expect(lines.filter((l) => JSON.stringify(l).includes(secret))).toEqual([]);
    expect(res.text).not.toContain(secret);
  });

  it("still quotes an agent id that is no key", async () => {
    const res = await request(app).get("/api/tasks").set("authorization", `Bearer ${tenant.apiKey}`).set("x-agent-id", "agt_nope");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: "agent_not_found", message: "No agent has the id 'agt_nope'." } });
  });
});
