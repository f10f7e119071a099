import { rawExchange, rawHead, rawJsonAnswer, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { ERRORS_TABLE_STACK, expectError, requestsOf } from "./errors-table.fixture";

// The 400 rows of the contract's error table, through HTTP against the real services; the other rows
// are in errors-table.int.test.ts.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), ERRORS_TABLE_STACK);
const { call, postJson } = requestsOf(() => ({ stack, tenant }));

/** A GET with a body, as some clients send one (fetch cannot): its status and JSON body. */
async function getWithBody(path: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: { error?: { details?: unknown } } }> {
  const head = rawHead("GET", path, { ...headers, "content-length": String(Buffer.byteLength(body)), connection: "close" });
  return rawJsonAnswer(await rawExchange(stack.gatewayUrl, head + body));
}

describe("400 invalid_request", () => {
  it("malformed JSON", async () => {
    const res = await call("/api/run", { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"query": "x",' });
    expect((await expectError(res, 400, "invalid_request")).error.message).toMatch(/not a valid JSON object/);
  });

  it("missing or invalid fields, listed in details", async () => {
    const body = await expectError(await postJson("/api/run", { stream: "yes", extra: 1 }), 400, "invalid_request");
    const paths = body.error.details.map((d: any) => d.path);
    expect(paths).toEqual(expect.arrayContaining(["query", "stream", "extra"]));
    expect(body.error.message).toMatch(/(^|; )Unrecognized key: "extra"($|;)/);
    for (const d of body.error.details) expect(d).toEqual({ path: expect.any(String), message: expect.any(String) });
  });

  it("a body with very many invalid fields: the first 20 named, the rest counted, long keys cut", async () => {
    const body: Record<string, number> = { query: 1 } as never;
    for (let i = 0; i < 3000; i++) body[`unknown_${i}_${"k".repeat(150)}`] = i;
    const res = await postJson("/api/run", body);
    const text = await res.clone().text();
    const { error } = await expectError(res, 400, "invalid_request");
    expect(text.length).toBeLessThan(10_000);
    expect(error.details).toHaveLength(20);
    expect(error.details[0]).toEqual({ path: "query", message: expect.any(String) });
    expect(error.details[1]).toEqual({ path: `unknown_0_${"k".repeat(90)}…`, message: "Unrecognized key" });
    expect(error.message).toMatch(/; and 2981 more invalid fields$/);
  });

  it("a long key is cut before a character that would not fit whole, never within a surrogate pair", async () => {
    const key = `${"a".repeat(99)}😀tail`;
    const res = await postJson("/api/run", { query: "x", [key]: 1 });
    const text = await res.clone().text();
    const { error } = await expectError(res, 400, "invalid_request");
    expect(error.details).toEqual([{ path: `${"a".repeat(99)}…`, message: "Unrecognized key" }]);
    expect(text).not.toMatch(/\\ud83d/i);
  });

  it("a long id in a path is repeated in a 404's message cut whole, never within a surrogate pair", async () => {
    const id = `x_${"a".repeat(97)}😀tail`;
    const { task_id: taskId } = (await (await postJson("/api/run", { query: "x", stream: false })).json()) as { task_id: string };
    for (const [res, message] of [
      [await call(`/api/tasks/${encodeURIComponent(id)}`), `No task has the id 'x_${"a".repeat(97)}…'.`],
      [await call(`/api/tasks/${taskId}/runs/${encodeURIComponent(id)}`), `Task '${taskId}' has no run 'x_${"a".repeat(97)}…'.`],
    ] as const) {
      const text = await res.clone().text();
      expect(res.status).toBe(404);
      expect(JSON.parse(text).error.message).toBe(message);
      expect(text).not.toMatch(/\\ud83d/i);
    }
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
    // Each one a field of `details` of its own.
    const two = await expectError(await call("/api/tasks?stauts=failed&ofset=2"), 400, "invalid_request");
    expect(two.error.details).toEqual([
      { path: "stauts", message: "Unrecognized key" },
      { path: "ofset", message: "Unrecognized key" },
    ]);
  });

  it("query parameters on endpoints that read none: refused before anything is done, a run never started with them ignored", async () => {
    const run = await postJson("/api/run", { query: "hi", stream: false });
    const { task_id, run_id } = (await run.json()) as { task_id: string; run_id: string };
    const runsBefore = await prisma.run.count({ where: { orgId: tenant.orgId } });
    const json = { ...tenant.headers, "content-type": "application/json" };
    const requests: [string, NonNullable<Parameters<typeof call>[1]>][] = [
      ["/api/run?stream=false", { method: "POST", headers: json, body: JSON.stringify({ query: "ignored?" }) }],
      ["/api/tasks?force=1", { method: "POST", headers: json, body: "{}" }],
      [`/api/tasks/${task_id}?stauts=x`, {}],
      [`/api/tasks/${task_id}/runs?status=failed`, {}],
      [`/api/tasks/${task_id}/runs/${run_id}/cancel?now=1`, { method: "POST" }],
      ["/api/memory?user_id=u1", { method: "POST", headers: json, body: JSON.stringify({ user_id: "u1", content: "x" }) }],
      ["/api/memory/mem_none?user_id=u1", { method: "DELETE" }],
      [`/api/tasks/${task_id}?force=1`, { method: "DELETE" }],
    ];
    for (const [path, init] of requests) {
      const body = await expectError(await call(path, { headers: tenant.headers, ...init }), 400, "invalid_request");
      const name = path.split("?")[1]!.split("=")[0]!;
      expect([path, body.error.message]).toEqual([path, expect.stringContaining(`"${name}"`)]);
    }
    expect(await prisma.run.count({ where: { orgId: tenant.orgId } })).toBe(runsBefore);
    expect(await prisma.task.count({ where: { id: task_id } })).toBe(1);
  });

  it("body fields on endpoints that take no body: refused before anything is done", async () => {
    const run = await postJson("/api/run", { query: "hi", stream: false });
    const { task_id, run_id } = (await run.json()) as { task_id: string; run_id: string };
    const json = { ...tenant.headers, "content-type": "application/json" };
    const requests: [string, string][] = [
      [`/api/tasks/${task_id}/runs/${run_id}/cancel`, "POST"],
      ["/api/memory/mem_none", "DELETE"],
      [`/api/tasks/${task_id}`, "DELETE"],
    ];
    for (const [path, method] of requests) {
      const body = await expectError(await call(path, { method, headers: json, body: JSON.stringify({ reason: "x" }) }), 400, "invalid_request");
      expect([path, body.error.details]).toEqual([path, [{ path: "reason", message: expect.any(String) }]]);
      // An array is no set of fields either.
      await expectError(await call(path, { method, headers: json, body: "[]" }), 400, "invalid_request");
    }
    // GET too, which fetch cannot send with a body: a filter sent as a body is not ignored.
    for (const path of ["/api/tasks", `/api/tasks/${task_id}`, `/api/tasks/${task_id}/runs`, `/api/tasks/${task_id}/runs/${run_id}`, `/api/tasks/${task_id}/runs/${run_id}/events`, `/api/messages?task_id=${task_id}`, "/api/memory"]) {
      const { status, body } = await getWithBody(path, { ...json, accept: "application/json" }, JSON.stringify({ status: "failed" }));
      expect([path, status, body.error?.details]).toEqual([path, 400, [{ path: "status", message: expect.any(String) }]]);
    }
    expect(await prisma.task.count({ where: { id: task_id } })).toBe(1);
    // An empty object is no field at all.
    expect((await call(`/api/tasks/${task_id}/runs/${run_id}/cancel`, { method: "POST", headers: json, body: "{}" })).status).toBe(202);
    expect((await call(`/api/tasks/${task_id}`, { method: "DELETE", headers: json, body: "{}" })).status).toBe(204);
  });

  it("a cursor that names nothing, or a malformed Last-Event-ID or Idempotency-Key, named in details as validation names fields", async () => {
    const run = await postJson("/api/run", { query: "hi", stream: false });
    const { task_id, run_id } = (await run.json()) as { task_id: string; run_id: string };
    const cases: [string, Record<string, string>, string][] = [
      [`/api/tasks/${task_id}/runs?after=run_nope`, {}, "after"],
      [`/api/messages?task_id=${task_id}&before=msg_nope`, {}, "before"],
      ["/api/memory?before=xyz", {}, "before"],
      [`/api/tasks/${task_id}/runs/${run_id}/events`, { "last-event-id": "x" }, "Last-Event-ID"],
      ["/api/run", { "idempotency-key": "has spaces", "content-type": "application/json" }, "Idempotency-Key"],
    ];
    for (const [path, headers, field] of cases) {
      const init = path === "/api/run" ? { method: "POST", body: JSON.stringify({ query: "q" }) } : {};
      const body = await expectError(await call(path, { ...init, headers: { ...tenant.headers, ...headers } }), 400, "invalid_request");
      expect([path, body.error.details]).toEqual([path, [{ path: field, message: body.error.message }]]);
    }
  });

  it("missing X-Agent-Id", async () => {
    const body = await expectError(await call("/api/memory", { headers: { authorization: tenant.headers.authorization! } }), 400, "invalid_request");
    expect(body.error.message).toMatch(/X-Agent-Id/);
    expect(body.error.details).toEqual([{ path: "X-Agent-Id", message: body.error.message }]);
  });

  it("X-Agent-Id sent twice", async () => {
    const headers = new Headers({ authorization: tenant.headers.authorization! });
    headers.append("x-agent-id", tenant.agentId);
    headers.append("x-agent-id", tenant.agentId);
    const body = await expectError(await fetch(`${stack.gatewayUrl}/api/memory`, { headers }), 400, "invalid_request");
    expect(body.error.message).toMatch(/X-Agent-Id once/);
    expect(body.error.details).toEqual([{ path: "X-Agent-Id", message: body.error.message }]);
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
