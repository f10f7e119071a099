import { startStack, type Stack } from "@agentrun/testing";

// What answers without an API key: the health probes and the OpenAPI document.
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ workers: 0, memory: false });
});

afterAll(async () => {
  await stack?.stop();
});

it.each(["/api/openapi.json", "/api/v1/openapi.json"])("serves the OpenAPI 3.1 document at %s without a key, outside the rate limit", async (path) => {
  const res = await fetch(`${stack.gatewayUrl}${path}`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(res.headers.get("x-ratelimit-limit")).toBeNull();
  expect(res.headers.get("x-request-id")).toBeTruthy();
  const doc = (await res.json()) as any;
  expect(doc.openapi).toBe("3.1.0");
  expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/api/run", "/api/tasks", "/api/tasks/{task_id}", "/api/messages", "/api/memory", "/api/memory/{memory_id}"]));
  expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
});

it("puts helmet's security headers on every response, and no X-Powered-By", async () => {
  for (const path of ["/healthz", "/api/openapi.json", "/api/tasks", "/nope"]) {
    const res = await fetch(`${stack.gatewayUrl}${path}`);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none';frame-ancestors 'none'");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("strict-transport-security")).toMatch(/max-age=/);
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("x-powered-by")).toBeNull();
    await res.body?.cancel();
  }
});
