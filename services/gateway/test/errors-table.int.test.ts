import { stackWithTenant, createTenant, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// One test per row of the contract's error table, through HTTP against the real services.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, gatewayEnv: { AUTH_FAILURE_LIMIT: "100000" } }, tenant: { plan: "enterprise", rpmLimit: 100_000 } });

interface Call {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

const call = (path: string, { method = "GET", headers = tenant.headers, body }: Call = {}) => fetch(`${stack.gatewayUrl}${path}`, { method, headers, body });
const postJson = (path: string, body: unknown, headers = tenant.headers) =>
  call(path, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });

/** Asserts the contract's error answer and returns its body. */
async function expectError(res: Response, status: number, code: string): Promise<any> {
  const text = await res.text();
  expect({ status: res.status, text }).toEqual({ status, text: expect.any(String) });
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(res.headers.get("x-request-id")).toMatch(/^\S+$/);
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  const body = JSON.parse(text);
  expect(body.error).toMatchObject({ code, message: expect.any(String) });
  expect(Object.keys(body)).toEqual(["error"]);
  for (const k of Object.keys(body.error)) expect(["code", "message", "details"]).toContain(k);
  expect(text).not.toMatch(/\bat .+:\d+:\d+|<html|<!DOCTYPE/i);
  return body;
}

describe("400 invalid_request", () => {
  it("malformed JSON", async () => {
    const res = await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"query": "x",' });
    expect((await expectError(res, 400, "invalid_request")).error.message).toMatch(/not a valid JSON object/);
  });

  it("missing or invalid fields, listed in details", async () => {
    const body = await expectError(await postJson("/api/run", { stream: "yes", extra: 1 }), 400, "invalid_request");
    const paths = body.error.details.map((d: any) => d.path);
    expect(paths).toEqual(expect.arrayContaining(["query", "stream"]));
    for (const d of body.error.details) expect(d).toEqual({ path: expect.any(String), message: expect.any(String) });
  });

  it("invalid query parameter", async () => {
    const body = await expectError(await call("/api/memory?limit=abc"), 400, "invalid_request");
    expect(body.error.details[0].path).toBe("limit");
  });

  it("query parameters an endpoint does not read, so that a misspelled filter is never ignored", async () => {
    const run = await postJson("/api/run", { query: "hi", stream: false });
    const { task_id, run_id } = (await run.json()) as { task_id: string; run_id: string };
    for (const path of ["/api/tasks?stauts=failed", "/api/memory?user_id[]=alice", `/api/messages?task_id=${task_id}&limits=5`, `/api/tasks/${task_id}/runs/${run_id}/events?from=3`]) {
      const body = await expectError(await call(path), 400, "invalid_request");
      expect([path, body.error.message]).toEqual([path, expect.stringMatching(/stauts|user_id\[\]|limits|from/)]);
    }
    // Also when Last-Event-ID, which wins over ?after, is sent.
    const events = `/api/tasks/${task_id}/runs/${run_id}/events?from=3`;
    expect((await expectError(await call(events, { headers: { ...tenant.headers, "last-event-id": "1" } }), 400, "invalid_request")).error.message).toMatch(/from/);
    expect((await call("/api/tasks?status=completed")).status).toBe(200);
  });

  it("missing X-Agent-Id", async () => {
    const body = await expectError(await call("/api/memory", { headers: { authorization: tenant.headers.authorization! } }), 400, "invalid_request");
    expect(body.error.message).toMatch(/X-Agent-Id/);
  });

  it("X-Agent-Id sent twice", async () => {
    const headers = new Headers({ authorization: tenant.headers.authorization! });
    headers.append("x-agent-id", tenant.agentId);
    headers.append("x-agent-id", tenant.agentId);
    const body = await expectError(await fetch(`${stack.gatewayUrl}/api/memory`, { headers }), 400, "invalid_request");
    expect(body.error.message).toMatch(/X-Agent-Id once/);
  });

  it.each([
    ["a run's metadata", "/api/run", (deep: string) => `{"query":"x","stream":false,"context":{"metadata":{"a":${deep}}}}`],
    ["a task's metadata", "/api/tasks", (deep: string) => `{"metadata":{"a":${deep}}}`],
    ["a memory's body", "/api/memory", (deep: string) => `{"content":"x","user_id":"u","extra":${deep}}`],
  ])("JSON nested thousands of levels deep in %s (a stack overflow anywhere after the parser)", async (_name, path, body) => {
    const nest = (n: number) => "[".repeat(n) + "]".repeat(n);
    const post = (text: string) => call(path, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: text });
    const before = await prisma.run.count({ where: { orgId: tenant.orgId } });
    for (const levels of [40, 5000]) {
      const err = await expectError(await post(body(nest(levels))), 400, "invalid_request");
      expect(err.error.message).toMatch(/more than 32 levels deep/);
    }
    expect(await prisma.run.count({ where: { orgId: tenant.orgId } })).toBe(before);
  });

  it("a body that is not valid UTF-8, rather than stored with U+FFFD in its place", async () => {
    const before = await prisma.run.count({ where: { orgId: tenant.orgId } });
    const body = Buffer.concat([Buffer.from('{"query":"x'), Buffer.from([0xff, 0xfe]), Buffer.from('","stream":false}')]);
    const err = await expectError(await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body }), 400, "invalid_request");
    expect(err.error.message).toMatch(/UTF-8/);
    expect(await prisma.run.count({ where: { orgId: tenant.orgId } })).toBe(before);
  });

  it.each([
    ["a run's metadata", "/api/run", '{"query":"x","stream":false,"context":{"metadata":{"__proto__":{"admin":true},"a":1}}}', "context.metadata"],
    ["a task's metadata, the key escaped", "/api/tasks", '{"metadata":{"\\u005f_proto__":1}}', "metadata"],
    ["a value deep in a task's metadata", "/api/tasks", '{"metadata":{"list":[{"__proto__":{}}]}}', "metadata.list.0"],
  ])("the key __proto__ in %s, rather than dropped without a word", async (_name, path, text, where) => {
    const before = await prisma.task.count({ where: { orgId: tenant.orgId } });
    const err = await expectError(await call(path, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: text }), 400, "invalid_request");
    expect(err.error.message).toBe(`The key __proto__ is not accepted (in ${where}).`);
    expect(err.error.details[0].path).toBe(`${where}.__proto__`);
    expect(await prisma.task.count({ where: { orgId: tenant.orgId } })).toBe(before);
    // A value "__proto__" is text like any other.
    expect((await call("/api/tasks", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"title":"__proto__","metadata":{"k":"__proto__"}}' })).status).toBe(201);
  });

  it.each([
    ["an integer beyond ±(2^53 − 1) in a task's metadata", "/api/tasks", '{"metadata":{"id":12345678901234567890}}', "12345678901234567890"],
    ["a number beyond a double's range in a run's metadata", "/api/run", '{"query":"x","stream":false,"context":{"metadata":{"big":1e309}}}', "1e309"],
  ])("%s, rather than stored rounded or as null", async (_name, path, text, number) => {
    const before = await prisma.task.count({ where: { orgId: tenant.orgId } });
    const err = await expectError(await call(path, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: text }), 400, "invalid_request");
    expect(err.error.message).toContain(`the number ${number},`);
    expect(await prisma.task.count({ where: { orgId: tenant.orgId } })).toBe(before);
    const kept = await call("/api/tasks", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"metadata":{"max":9007199254740991,"f":1.5e300,"s":"12345678901234567890"}}' });
    expect(((await kept.json()) as { metadata: unknown }).metadata).toEqual({ max: 9007199254740991, f: 1.5e300, s: "12345678901234567890" });
  });

  it("JSON nested within 32 levels is data like any other", async () => {
    const res = await call("/api/tasks", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: `{"metadata":{"a":${"[".repeat(29)}${"]".repeat(29)}}}` });
    expect(res.status).toBe(201);
  });

  it("malformed percent-encoding in the path", async () => {
    await expectError(await call("/api/memory/%E0%A4%A", { method: "DELETE" }), 400, "invalid_request");
  });

  it.each([
    ["bytes that are not UTF-8", "/api/memory?user_id=a%FF"],
    ["an escape without its two hex digits", "/api/tasks?status=%zz"],
    ["a cut UTF-8 sequence", "/api/tasks?limit=1&x=%E2%9C"],
    ["an encoded lone surrogate", "/api/memory?user_id=%ED%A0%80"],
  ])("malformed percent-encoding in the query string: %s, rather than read as U+FFFD or left escaped", async (_what, path) => {
    const err = await expectError(await call(path), 400, "invalid_request");
    expect(err.error.message).toBe("The URL contains a malformed percent-encoding.");
  });

  it("a well-formed query string is decoded as before: escapes, UTF-8 and '+' for a space", async () => {
    const created = await postJson("/api/memory", { user_id: "ü ser", content: "query strings" });
    expect(created.status).toBe(201);
    const res = await call("/api/memory?user_id=%C3%BC+ser&limit=%31");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { memories: { content: string }[] };
    expect(body.memories.map((m) => m.content)).toEqual(["query strings"]);
  });
});

describe("400 invalid_request: U+0000 and lone surrogates, which PostgreSQL cannot store", () => {
  it.each([
    ["U+0000 in a run's query", "/api/run", { query: "a\0b", stream: false }, "query", "U+0000"],
    ["U+0000 in a run's context", "/api/run", { query: "a", stream: false, context: { user_id: "u", metadata: { list: ["ok", "x\0"] } } }, "context.metadata.list.1", "U+0000"],
    ["U+0000 in a key of the metadata", "/api/run", { query: "a", stream: false, context: { metadata: { "k\0": 1 } } }, "context.metadata.k\0", "U+0000"],
    ["U+0000 in a task's title", "/api/tasks", { title: "t\0" }, "title", "U+0000"],
    ["U+0000 in a memory's content", "/api/memory", { content: "c\0", user_id: "u" }, "content", "U+0000"],
    ["a lone surrogate in a run's query", "/api/run", { query: "a\ud800b", stream: false }, "query", "surrogate"],
    ["a lone surrogate in a run's metadata", "/api/run", { query: "a", stream: false, context: { metadata: { k: "\udfff" } } }, "context.metadata.k", "surrogate"],
    ["a lone surrogate in a memory's content", "/api/memory", { content: "c\udc00", user_id: "u" }, "content", "surrogate"],
  ])("%s", async (_what, path, body, where, named) => {
    const before = await prisma.run.count({ where: { orgId: tenant.orgId } });
    const err = await expectError(await postJson(path, body), 400, "invalid_request");
    expect(err.error.details).toEqual([{ path: where, message: expect.stringContaining(named) }]);
    expect(await prisma.run.count({ where: { orgId: tenant.orgId } })).toBe(before);
  });

  it("U+0000 in the URL", async () => {
    await expectError(await call("/api/memory?user_id=a%00b"), 400, "invalid_request");
    await expectError(await call("/api/tasks/task_x%00"), 400, "invalid_request");
  });

  it("a surrogate pair is text like any other", async () => {
    const res = await postJson("/api/run", { query: "smile \ud83d\ude00", stream: false });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).output).toBe("Echo: smile \u{1F600}");
  });

  it("a backslash followed by u0000 is text like any other", async () => {
    const res = await postJson("/api/tasks", { title: "\\u0000 literally" });
    expect(res.status).toBe(201);
    expect(((await res.json()) as any).title).toBe("\\u0000 literally");
  });
});

describe("401 unauthorized", () => {
  it.each([
    ["missing", {}],
    ["not a bearer token", { authorization: "Basic dXNlcjpwYXNz" }],
    ["unknown", { authorization: "Bearer ar_live_unknownkey0000000000000000" }],
  ])("%s key", async (_, auth) => {
    await expectError(await call("/api/memory", { headers: { ...auth, "x-agent-id": tenant.agentId } }), 401, "unauthorized");
  });

  it("revoked key", async () => {
    const t = await createTenant(prisma);
    await prisma.apiKey.update({ where: { id: t.keyId }, data: { revokedAt: new Date() } });
    await expectError(await call("/api/memory", { headers: t.headers }), 401, "unauthorized");
  });
});

it("402 insufficient_credits when the balance is not positive", async () => {
  const broke = await createTenant(prisma, { credits: 0 });
  await expectError(await postJson("/api/run", { query: "x", stream: false }, broke.headers), 402, "insufficient_credits");
});

describe("403", () => {
  it("forbidden: the agent belongs to another organization", async () => {
    const other = await createTenant(prisma);
    await expectError(await call("/api/memory", { headers: { ...tenant.headers, "x-agent-id": other.agentId } }), 403, "forbidden");
  });

  it("forbidden: the task belongs to another organization", async () => {
    const other = await createTenant(prisma);
    const first = await postJson("/api/run", { query: "x", stream: false }, other.headers);
    const { task_id } = (await first.json()) as any;
    await expectError(await postJson("/api/run", { query: "x", task_id }), 403, "forbidden");
  });
  // https_required: see https-required.int.test.ts.
});

describe("404", () => {
  it("agent_not_found", async () => {
    await expectError(await call("/api/memory", { headers: { ...tenant.headers, "x-agent-id": "agt_nope" } }), 404, "agent_not_found");
  });

  it("task_not_found", async () => {
    await expectError(await postJson("/api/run", { query: "x", task_id: "task_nope" }), 404, "task_not_found");
  });

  it("memory_not_found", async () => {
    await expectError(await call("/api/memory/mem_nope", { method: "DELETE" }), 404, "memory_not_found");
  });

  it.each([
    ["an unknown route outside /api, without a key", "GET", "/nope", {}],
    ["an unknown route under /api", "GET", "/api/nope", undefined],
    ["an unknown route under /api/v1", "GET", "/api/v1/nope", undefined],
    ["a known path with a method it does not serve", "PUT", "/api/run", undefined],
    ["DELETE on a collection", "DELETE", "/api/memory", undefined],
    // Express would answer OPTIONS itself (200 text/plain) on a path it knows.
    ["OPTIONS on a known path", "OPTIONS", "/api/run", undefined],
    ["OPTIONS on a public path", "OPTIONS", "/api/openapi.json", {}],
  ])("not_found: %s", async (_, method, path, headers) => {
    const body = await expectError(await call(path, { method, headers: headers ?? tenant.headers }), 404, "not_found");
    expect(body.error.message).toContain(method);
  });

  it.each([
    ["an unknown route", "GET", "/api/nope/"],
    ["OPTIONS", "OPTIONS", "/api/nope/"],
  ])("not_found names at most 200 characters of a long path: %s", async (_, method, prefix) => {
    const path = prefix + "x".repeat(8000);
    const body = await expectError(await call(`${path}?q=1`, { method }), 404, "not_found");
    expect(body.error.message).toBe(`No route for ${method} ${path.slice(0, 200)}….`);
  });
});

it("409 run_in_progress: a run is requested on a task whose run is still going", async () => {
  const slow = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:10] slow" }, headers: tenant.headers });
  await slow.waitFor((e) => e.type === "run_started");
  const taskId = slow.events[0].task_id;
  await expectError(await postJson("/api/run", { query: "again", task_id: taskId }), 409, "run_in_progress");
  expect((await slow.result).events.at(-1)?.data.type).toBe("run_completed");
});

it("413 payload_too_large: a body over BODY_LIMIT_BYTES (1 MiB)", async () => {
  const big = JSON.stringify({ query: "x".repeat(1024 * 1024 + 10) });
  const body = await expectError(await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: big }), 413, "payload_too_large");
  expect(body.error.message).toMatch(/1048576/);
});

describe("415 unsupported_media_type", () => {
  it.each([
    ["text/plain", "query=x"],
    ["application/x-www-form-urlencoded", "query=x"],
    ["application/json; charset=latin1", '{"query":"x"}'],
  ])("%s", async (type, body) => {
    await expectError(await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": type }, body }), 415, "unsupported_media_type");
  });

  it("a body without a content type", async () => {
    await expectError(await call("/api/run", { method: "POST", body: Buffer.from('{"query":"x"}') }), 415, "unsupported_media_type");
  });
});

it("429 rate_limited: over the plan's requests per minute", async () => {
  const free = await createTenant(prisma, { plan: "free" });
  for (let i = 0; i < 10; i++) expect((await call("/api/memory", { headers: free.headers })).status).toBe(200);
  const res = await call("/api/memory", { headers: free.headers });
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  await expectError(res, 429, "rate_limited");
});

// 500 internal_error and 503 unavailable: see errors-outages.int.test.ts.
