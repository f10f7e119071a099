import { stackWithTenant, createTenant, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// The contract's order of checks: authentication (401) → agent (400/404/403) → rate limit (429)
// → body and parameters (400/413/415) → resources (404/403/409) → credits (402).
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, gatewayEnv: { AUTH_FAILURE_LIMIT: "100000" } }, tenant: { plan: "enterprise", rpmLimit: 100_000 } });

const BAD_JSON = '{"query":';
const post = (headers: Record<string, string>, body: string, contentType = "application/json") =>
  fetch(`${stack.gatewayUrl}/api/run`, { method: "POST", headers: { ...headers, "content-type": contentType }, body });
const codeOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as any).error?.code });

it("a bad key wins over everything else", async () => {
  const headers = { authorization: "Bearer nope", "x-agent-id": "agt_nope" };
  expect(await codeOf(await post(headers, BAD_JSON))).toEqual({ status: 401, code: "unauthorized" });
  expect(await codeOf(await post(headers, "x", "text/plain"))).toEqual({ status: 401, code: "unauthorized" });
  expect(await codeOf(await post({}, "x".repeat(2 * 1024 * 1024)))).toEqual({ status: 401, code: "unauthorized" });
});

it("agent checks come before the body: missing header 400, unknown 404, another organization's 403", async () => {
  const other = await createTenant(prisma);
  const auth = { authorization: tenant.headers.authorization! };
  const missing = await codeOf(await post(auth, BAD_JSON));
  expect(missing).toEqual({ status: 400, code: "invalid_request" });
  expect(await codeOf(await post({ ...auth, "x-agent-id": "agt_nope" }, BAD_JSON))).toEqual({ status: 404, code: "agent_not_found" });
  expect(await codeOf(await post({ ...auth, "x-agent-id": other.agentId }, "x", "text/plain"))).toEqual({ status: 403, code: "forbidden" });
});

it("the rate limit comes before the body and the credits", async () => {
  const free = await createTenant(prisma, { plan: "free", credits: 0 });
  for (let i = 0; i < 10; i++) await fetch(`${stack.gatewayUrl}/api/memory`, { headers: free.headers }).then((r) => r.body?.cancel());
  expect(await codeOf(await post(free.headers, BAD_JSON))).toEqual({ status: 429, code: "rate_limited" });
  expect(await codeOf(await post(free.headers, "x".repeat(2 * 1024 * 1024)))).toEqual({ status: 429, code: "rate_limited" });
  expect(await codeOf(await post(free.headers, JSON.stringify({ query: "x" })))).toEqual({ status: 429, code: "rate_limited" });
});

it("the body comes before the resources and the credits", async () => {
  const broke = await createTenant(prisma, { credits: 0 });
  expect(await codeOf(await post(broke.headers, JSON.stringify({ query: "", task_id: "task_nope" })))).toEqual({ status: 400, code: "invalid_request" });
  expect(await codeOf(await post(broke.headers, "x", "text/plain"))).toEqual({ status: 415, code: "unsupported_media_type" });
  expect(await codeOf(await post(broke.headers, JSON.stringify({ query: "x".repeat(2 * 1024 * 1024) })))).toEqual({ status: 413, code: "payload_too_large" });
});

it("resources come before the credits", async () => {
  const broke = await createTenant(prisma, { credits: 0 });
  expect(await codeOf(await post(broke.headers, JSON.stringify({ query: "x", task_id: "task_nope" })))).toEqual({ status: 404, code: "task_not_found" });
  expect(await codeOf(await post(broke.headers, JSON.stringify({ query: "x" })))).toEqual({ status: 402, code: "insufficient_credits" });
});
