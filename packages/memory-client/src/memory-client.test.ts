import type { ServerResponse } from "node:http";
import { createMemoryClient } from "./memory-client";
import { callMethod, entry, json, rejection, scope, serve, startServer, type Method } from "./memory-client.fixture";

describe("memory client", () => {
  it("sends the token, path, query and body and returns the response body", async () => {
    const seen: Array<{ method?: string; url?: string; auth?: string; body: string }> = [];
    const url = await serve((req, body, res) => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
      if (req.method === "DELETE") return void res.writeHead(204).end();
      if (req.method === "POST") return json(res, 201, { memory: entry, created: true });
      json(res, 200, req.url?.startsWith("/internal/memories?") ? { memories: [entry], has_more: false } : { memory: entry });
    });
    const client = createMemoryClient({ baseUrl: `${url}/`, token: "secret-token-0123456789" });

    await expect(client.create({ ...scope, user_id: "u1", content: "likes tea" })).resolves.toEqual({ memory: entry, created: true });
    await expect(client.list({ ...scope, limit: 5 })).resolves.toEqual({ memories: [entry], has_more: false });
    await client.list({ ...scope, limit: 5, before: "mem_9" });
    await expect(client.get(scope, "mem 1/x")).resolves.toEqual({ memory: entry });
    await expect(client.remove(scope, "mem_1")).resolves.toBeUndefined();

    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      "POST /internal/memories",
      "GET /internal/memories?org_id=org_1&agent_id=agt_1&limit=5",
      "GET /internal/memories?org_id=org_1&agent_id=agt_1&limit=5&before=mem_9",
      "GET /internal/memories/mem%201%2Fx?org_id=org_1&agent_id=agt_1",
      "DELETE /internal/memories/mem_1?org_id=org_1&agent_id=agt_1",
    ]);
    expect(seen.every((s) => s.auth === "Bearer secret-token-0123456789")).toBe(true);
    expect(JSON.parse(seen[0]!.body)).toEqual({ ...scope, user_id: "u1", content: "likes tea" });
  });

  it("names the request it serves in X-Request-Id when given one", async () => {
    const ids: Array<string | undefined> = [];
    const url = await serve((req, _body, res) => {
      ids.push(req.headers["x-request-id"] as string | undefined);
      json(res, 200, { memories: [entry], has_more: false });
    });
    const client = createMemoryClient({ baseUrl: url, token: "secret-token-0123456789" });
    await client.list(scope, { requestId: "run_0123" });
    await client.list(scope);
    expect(ids).toEqual(["run_0123", undefined]);
  });

  it("rethrows the service's contract errors with their status, message and details", async () => {
    const details = [{ path: "content", message: "Too big" }];
    const url = await serve((req, _body, res) => {
      if (req.url?.startsWith("/internal/memories/missing")) return json(res, 404, { error: { code: "memory_not_found", message: "No memory entry has this id." } });
      if (req.url?.startsWith("/internal/memories/other")) return json(res, 403, { error: { code: "forbidden", message: "Another agent's." } });
      json(res, 400, { error: { code: "invalid_request", message: "The request has invalid fields.", details } });
    });
    const client = createMemoryClient({ baseUrl: url, token: "t" });

    const notFound = await rejection(client.get(scope, "missing"));
    expect([notFound.code, notFound.status, notFound.message]).toEqual(["memory_not_found", 404, "No memory entry has this id."]);
    const forbidden = await rejection(client.remove(scope, "other"));
    expect([forbidden.code, forbidden.status]).toEqual(["forbidden", 403]);
    const invalid = await rejection(client.create({ ...scope, user_id: "u", content: "x" }));
    expect([invalid.code, invalid.status, invalid.details]).toEqual(["invalid_request", 400, details]);
  });

  it.each([
    ["a 500 in the contract shape", (res: ServerResponse) => json(res, 500, { error: { code: "internal_error", message: "boom" } })],
    ["a 503", (res: ServerResponse) => json(res, 503, { error: { code: "unavailable", message: "db down" } })],
    ["a 502 HTML page", (res: ServerResponse) => void res.writeHead(502, { "content-type": "text/html" }).end("<h1>Bad gateway</h1>")],
    ["a 404 that is not the contract's shape", (res: ServerResponse) => json(res, 404, { message: "nope" })],
    ["a 4xx with an unknown code", (res: ServerResponse) => json(res, 418, { error: { code: "teapot", message: "short and stout" } })],
    ["a 401 for a wrong internal token", (res: ServerResponse) => json(res, 401, { error: { code: "unauthorized", message: "A valid internal token is required." } })],
    ["a 404 for a route the service lacks", (res: ServerResponse) => json(res, 404, { error: { code: "not_found", message: "No route for GET /internal/memories." } })],
    ["a 200 that is not JSON", (res: ServerResponse) => void res.writeHead(200).end("ok")],
    ["a redirect", (res: ServerResponse) => void res.writeHead(302, { location: "http://example.com/" }).end()],
    ["a dropped connection", (res: ServerResponse) => res.socket?.destroy()],
  ])("maps %s to unavailable", async (_name, respond) => {
    const url = await serve((_req, _body, res) => respond(res));
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t" }).list(scope));
    expect([err.code, err.status, err.message]).toEqual(["unavailable", 503, "memory service unavailable"]);
    // What went wrong stays on the cause, for the log.
    // (fetch's errors come from Node's own realm, not the test's: no instanceof here.)
    expect((err.cause as { message?: unknown } | undefined)?.message).toEqual(expect.stringMatching(/\S/));
  });

  it("maps a 200 {} for list to unavailable", async () => {
    const url = await serve((_req, _body, res) => json(res, 200, {}));
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t" }).list(scope));
    expect([err.code, err.status, err.message]).toEqual(["unavailable", 503, "memory service unavailable"]);
    expect((err.cause as Error).message).toBe("memory service answered GET /internal/memories with HTTP 200 and a body not in the contract's shape");
  });


  it.each<[string, Method, number, unknown]>([
    ["create without created", "create", 201, { memory: entry }],
    ["create with an unknown category", "create", 200, { memory: { ...entry, category: "secret" }, created: false }],
    ["create answered 204", "create", 204, undefined],
    ["list without has_more", "list", 200, { memories: [entry] }],
    ["list with content that is not a string", "list", 200, { memories: [{ ...entry, content: 42 }], has_more: false }],
    ["list answered 204", "list", 204, undefined],
    ["get without memory", "get", 200, { memories: [entry] }],
    ["get answered null", "get", 200, null],
    ["search hits without score", "search", 200, { memories: [entry] }],
    ["search answered a bare array", "search", 200, []],
    ["context answered {}", "context", 200, {}],
    ["context with memories that are not an array", "context", 200, { memories: "likes tea" }],
    ["context answered 204", "context", 204, undefined],
    ["remove answered 200 {}", "remove", 200, {}],
    ["remove answered 202", "remove", 202, undefined],
  ])("maps %s to unavailable", async (_name, method, status, body) => {
    const url = await serve((_req, _body, res) => (body === undefined ? void res.writeHead(status).end() : json(res, status, body)));
    const err = await rejection(callMethod(method, url));
    expect([err.code, err.status]).toEqual(["unavailable", 503]);
  });

  it("returns search and context hits in the contract's shape, without fields it does not name", async () => {
    const url = await serve((req, _body, res) =>
      json(res, 200, { memories: [{ ...entry, ...(req.url?.endsWith("/search") ? { score: 0.5 } : {}), internal_note: "x" }], extra: true }),
    );
    await expect(callMethod("search", url)).resolves.toEqual({ memories: [{ ...entry, score: 0.5 }] });
    await expect(callMethod("context", url)).resolves.toEqual({ memories: [entry] });
  });

  it("maps a stopped server (closed port) to unavailable within the timeout", async () => {
    const { url, server } = await startServer(() => undefined);
    await new Promise((resolve) => server.close(resolve));
    const started = Date.now();
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 20_000 }).get(scope, "mem_1"));
    expect(err.code).toBe("unavailable");
    // At the refusal, not at the timeout.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("gives up on a server that never answers after timeoutMs", async () => {
    const url = await serve(() => undefined);
    const started = Date.now();
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 200 }).search({ ...scope, user_id: "u", query: "tea" }));
    const elapsed = Date.now() - started;
    expect(err.code).toBe("unavailable");
    expect(elapsed).toBeGreaterThanOrEqual(150);
    expect(elapsed).toBeLessThan(1000);
  });

  it("says that a save or a delete that timed out may still take effect, and a refused one just unavailable", async () => {
    const url = await serve(() => undefined);
    const client = createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 200 });
    for (const call of [() => client.create({ ...scope, user_id: "u", content: "tea" }), () => client.remove(scope, "mem_1")]) {
      const err = await rejection(call());
      expect([err.code, err.status, err.message]).toEqual(["unavailable", 503, "The memory service did not answer within 200 ms; the change may still take effect."]);
    }
    // A read that timed out changed nothing.
    expect((await rejection(client.get(scope, "mem_1"))).message).toBe("memory service unavailable");
    const { url: closed, server } = await startServer(() => undefined);
    await new Promise((resolve) => server.close(resolve));
    const refused = await rejection(createMemoryClient({ baseUrl: closed, token: "t", timeoutMs: 500 }).create({ ...scope, user_id: "u", content: "tea" }));
    expect([refused.code, refused.message]).toEqual(["unavailable", "memory service unavailable"]);
  });

  it("says that a save or a delete whose connection broke before the answer may have taken effect", async () => {
    // The service takes the change, then dies before it answers (the connection is cut).
    const received: string[] = [];
    const url = await serve((req, _body, res) => {
      received.push(`${req.method} ${req.url}`);
      res.socket?.destroy();
    });
    const client = createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 5000 });
    for (const call of [() => client.create({ ...scope, user_id: "u", content: "tea" }), () => client.remove(scope, "mem_1")]) {
      const err = await rejection(call());
      expect([err.code, err.status, err.message]).toEqual(["unavailable", 503, "The connection to the memory service was lost before its answer; the change may have taken effect."]);
    }
    expect(received).toHaveLength(2);
    // A read cut the same way changed nothing.
    expect((await rejection(client.get(scope, "mem_1"))).message).toBe("memory service unavailable");
  });

  it("says a save refused on its way (a redirect the client does not follow) is just unavailable", async () => {
    const url = await serve((_req, _body, res) => void res.writeHead(307, { location: "http://127.0.0.1:1/elsewhere" }).end());
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 5000 }).create({ ...scope, user_id: "u", content: "tea" }));
    expect([err.code, err.message]).toEqual(["unavailable", "memory service unavailable"]);
  });

  it("gives up on a server that stalls in the middle of the body after timeoutMs", async () => {
    const url = await serve((_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"memories":[');
    });
    const started = Date.now();
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 200 }).context({ ...scope, user_id: "u", query: "tea" }));
    expect(err.code).toBe("unavailable");
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("rejects with the caller's abort reason when the caller aborts", async () => {
    const url = await serve(() => undefined);
    const controller = new AbortController();
    const reason = new Error("run cancelled");
    const pending = createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 5000 }).list(scope, { signal: controller.signal });
    setTimeout(() => controller.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);
  });
});

describe("memory client with a fetch that ignores its signal", () => {
  it("still rejects with unavailable after timeoutMs", async () => {
    const stuck = (() => new Promise<Response>(() => undefined)) as typeof fetch;
    const started = Date.now();
    const err = await rejection(createMemoryClient({ baseUrl: "http://127.0.0.1:9", token: "t", timeoutMs: 100, fetch: stuck }).list(scope));
    expect(err.code).toBe("unavailable");
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
