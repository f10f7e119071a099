import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomInt } from "node:crypto";
import { generateApiKey } from "@agentrun/api-keys";
import { createLogger } from "@agentrun/logger";
import { createTenant, testEnv, type Tenant } from "@agentrun/testing";
import { createApp } from "../src/app";
import { gatewayConfigSchema } from "../src/config";
import { createGatewayDeps } from "../src/create-deps";
import type { GatewayDeps } from "../src/deps";

// The real app on the test database and Redis, so that the API key lookups of its own Prisma
// client can be counted.
const LIMIT = 4;
let deps: GatewayDeps;
let close: () => Promise<void>;
let server: http.Server;
let url: string;
let tenant: Tenant;

beforeAll(async () => {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const config = gatewayConfigSchema.parse({
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `${redisPrefix}:key-format`,
    LOG_LEVEL: "silent",
    TRUST_PROXY: "true",
    AUTH_FAILURE_LIMIT: String(LIMIT),
  });
  ({ deps, close } = createGatewayDeps(config, createLogger({ service: "gateway", level: "silent", pretty: false })));
  tenant = await createTenant(deps.prisma);
  server = http.createServer(createApp(deps));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 30_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await close?.();
});

afterEach(() => jest.restoreAllMocks());

// Each test speaks from an address of its own (TRUST_PROXY), so failure counts do not mix.
const newIp = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
const get = async (ip: string, authorization: string) => {
  const res = await fetch(`${url}/api/tasks`, { headers: { authorization, "x-agent-id": tenant.agentId, "x-forwarded-for": ip } });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
};
/** A well-formed key that no organization has. */
const unknownKey = () => generateApiKey().apiKey;

it("refuses a token that cannot be an API key with the unknown key's 401, without looking it up", async () => {
  const lookups = jest.spyOn(deps.prisma.apiKey, "findUnique");
  const ip = newIp();
  const unknown = await get(ip, `Bearer ${unknownKey()}`);
  expect(unknown.status).toBe(401);
  expect(lookups).toHaveBeenCalledTimes(1);

  for (const token of ["garbage", "ar_live_short", `${tenant.apiKey}x`, `ar_test_${tenant.apiKey.slice(8)}`]) {
    const res = await get(newIp(), `Bearer ${token}`);
    expect(res).toEqual({ status: 401, body: unknown.body });
    expect(res.body.error?.code).toBe("unauthorized");
  }
  expect(lookups).toHaveBeenCalledTimes(1);

  // The key itself still works.
  expect((await get(newIp(), tenant.headers.authorization!)).status).toBe(200);
});

it("counts a malformed token as a failed authentication, like an unknown key", async () => {
  const lookups = jest.spyOn(deps.prisma.apiKey, "findUnique");
  const ip = newIp();
  for (let i = 0; i < LIMIT; i++) expect((await get(ip, i % 2 ? `Bearer ${unknownKey()}` : `Bearer garbage-${i}`)).status).toBe(401);
  const over = await get(ip, "Bearer garbage");
  expect(over.status).toBe(429);
  expect(over.body.error?.code).toBe("rate_limited");
  expect(lookups).toHaveBeenCalledTimes(LIMIT / 2);
});

it("challenges every 401 with WWW-Authenticate: Bearer, naming what was wrong with the credentials", async () => {
  const challenge = async (headers: Record<string, string> | [string, string][]) => {
    const res = await fetch(`${url}/api/tasks`, { headers });
    expect({ status: res.status, code: ((await res.json()) as { error?: { code?: string } }).error?.code }).toEqual({ status: 401, code: "unauthorized" });
    return res.headers.get("www-authenticate");
  };
  const agent = { "x-agent-id": tenant.agentId };
  // No credentials: the scheme and realm, no error (RFC 6750 3.1).
  expect(await challenge({ ...agent, "x-forwarded-for": newIp() })).toBe('Bearer realm="agentrun"');
  // A header that is not a Bearer token, or sent twice: invalid_request.
  expect(await challenge({ ...agent, "x-forwarded-for": newIp(), authorization: "Basic dXNlcjpwYXNz" })).toBe('Bearer realm="agentrun", error="invalid_request"');
  const twice: [string, string][] = [["x-agent-id", tenant.agentId], ["x-forwarded-for", newIp()], ["authorization", tenant.headers.authorization!], ["authorization", tenant.headers.authorization!]];
  expect(await challenge(twice)).toBe('Bearer realm="agentrun", error="invalid_request"');
  // A token that is unknown or cannot be a key: invalid_token.
  for (const token of [unknownKey(), "garbage"]) {
    expect(await challenge({ ...agent, "x-forwarded-for": newIp(), authorization: `Bearer ${token}` })).toBe('Bearer realm="agentrun", error="invalid_token"');
  }
  // An accepted key's answers carry no challenge.
  const ok = await fetch(`${url}/api/tasks`, { headers: { ...agent, "x-forwarded-for": newIp(), authorization: tenant.headers.authorization! } });
  expect({ status: ok.status, challenge: ok.headers.get("www-authenticate") }).toEqual({ status: 200, challenge: null });
});
