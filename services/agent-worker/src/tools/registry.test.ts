import { once } from "node:events";
import { createServer, type Server } from "node:http";
import net from "node:net";
import { createMemoryClient } from "@agentrun/memory-client";
import { startMemoryService, type MemoryService } from "@agentrun/testing";
import { BUILT_IN_TOOLS, MAX_TOOL_ERROR_CHARS, ToolRegistry } from "./registry";
import { MAX_TOOL_JSON_DEPTH, type ToolContext } from "./tool";

let memoryUrl: string;
// A site the http tool may reach (allowPrivate).
let site: Server;
let siteUrl: string;
const registry = new ToolRegistry({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false });
const ALL = [...BUILT_IN_TOOLS];

beforeAll(async () => {
  // The memory service is down: a real client on a port nobody listens on.
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  memoryUrl = `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
  await new Promise((resolve) => srv.close(resolve));
  site = createServer((req, res) => {
    if (req.url === "/fail") res.writeHead(500).end("down");
    if (req.url?.startsWith("/reset")) req.socket.destroy();
    // /hang never answers.
  });
  site.listen(0, "127.0.0.1");
  await once(site, "listening");
  siteUrl = `http://127.0.0.1:${(site.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  site.closeAllConnections();
  await new Promise((resolve) => site.close(resolve));
});

const ctxFor = (extra: Partial<ToolContext> = {}): ToolContext => ({
  orgId: "org_test",
  runId: "run_test",
  agentId: "agt_test",
  httpAllowlist: [],
  memory: createMemoryClient({ baseUrl: memoryUrl, token: "t", timeoutMs: 500 }),
  signal: new AbortController().signal,
  ...extra,
});

const names = (enabled: readonly string[]) => registry.definitions(enabled).map((d) => (d.type === "function" ? d.function.name : d.type));

describe("ToolRegistry.definitions", () => {
  it("offers every action of every built-in tool as <tool>_<action>", () => {
    expect(names(ALL).sort()).toEqual(["calc_evaluate", "clock_now", "http_get", "memory_save", "memory_search"]);
  });

  it("declares each function's parameters as a schema body, without a $schema keyword", () => {
    for (const d of registry.definitions(ALL)) {
      if (d.type !== "function") throw new Error("a tool that is not a function");
      expect(d.function.parameters).toMatchObject({ type: "object", properties: expect.any(Object) });
      expect(d.function.parameters).not.toHaveProperty("$schema");
    }
  });

  it("offers only the enabled tools' functions", () => {
    expect(names(["calc"])).toEqual(["calc_evaluate"]);
    expect(names(["memory", "clock"]).sort()).toEqual(["clock_now", "memory_save", "memory_search"]);
    expect(names([])).toEqual([]);
    expect(names(["no-such-tool"])).toEqual([]);
  });

  it("gives the same definitions whatever the order of the enabled tools", () => {
    expect(names(["memory", "calc"]).sort()).toEqual(names(["calc", "memory"]).sort());
  });

  it("describes each function with a description and a JSON schema of its parameters", () => {
    for (const def of registry.definitions(ALL)) {
      if (def.type !== "function") throw new Error("expected function tools only");
      expect(def.function.description).toEqual(expect.any(String));
      expect(def.function.parameters).toMatchObject({ type: "object", properties: expect.any(Object) });
    }
    const calc = registry.definitions(["calc"])[0];
    if (calc?.type !== "function") throw new Error("expected calc_evaluate");
    expect(calc.function.parameters).toMatchObject({
      type: "object",
      properties: { expression: { type: "string", minLength: 1, maxLength: 1000, description: expect.any(String) } },
      required: ["expression"],
    });
    const save = registry.definitions(["memory"]).find((d) => d.type === "function" && d.function.name === "memory_save");
    if (save?.type !== "function") throw new Error("expected memory_save");
    expect(save.function.parameters).toMatchObject({
      properties: { content: { type: "string" }, category: { enum: ["general", "preference", "fact", "instruction"] } },
      required: ["content"],
    });
  });
});

describe("ToolRegistry.call", () => {
  it("runs an enabled function and reports its tool, action, params and result", async () => {
    const started: unknown[] = [];
    const outcome = await registry.call("calc_evaluate", '{"expression":"6*7"}', ["calc"], ctxFor(), (c) => started.push(c));
    expect(outcome).toEqual({ tool: "calc", action: "evaluate", params: { expression: "6*7" }, result: { expression: "6*7", result: 42 }, ok: true, charged: true });
    expect(started).toEqual([{ tool: "calc", action: "evaluate", params: { expression: "6*7" } }]);
  });

  it("treats empty arguments as {}", async () => {
    const outcome = await registry.call("clock_now", "", ["clock"], ctxFor());
    expect(outcome.ok).toBe(true);
    expect(outcome.result).toMatchObject({ iso: expect.stringMatching(/Z$/) });
  });

  it.each([
    ["arguments that are not JSON", "{oops"],
    ["a truncated JSON object", '{"expression": "1+'],
  ])("answers invalid_arguments for %s, still announcing the call with the arguments as sent", async (_name, args) => {
    const started: unknown[] = [];
    const outcome = await registry.call("calc_evaluate", args, ["calc"], ctxFor(), (c) => started.push(c));
    expect(outcome).toMatchObject({ tool: "calc", action: "evaluate", params: { arguments: args }, ok: false, charged: false, result: { error: { code: "invalid_arguments", message: expect.any(String) } } });
    expect(started).toEqual([{ tool: "calc", action: "evaluate", params: { arguments: args } }]);
  });

  it(`answers invalid_arguments for arguments nested more than ${MAX_TOOL_JSON_DEPTH} levels deep, announcing the call with them as text`, async () => {
    const args = `{"expression":${"[".repeat(6000)}${"]".repeat(6000)}}`;
    const started: unknown[] = [];
    const outcome = await registry.call("calc_evaluate", args, ["calc"], ctxFor(), (c) => started.push(c));
    expect(outcome).toMatchObject({ params: { arguments: args }, ok: false, charged: false, result: { error: { code: "invalid_arguments", message: expect.stringContaining("levels deep") } } });
    expect(started).toEqual([{ tool: "calc", action: "evaluate", params: { arguments: args } }]);
    // At the limit the arguments are parsed (and then checked against the tool's parameters).
    const atLimit = await registry.call("calc_evaluate", `{"expression":${"[".repeat(MAX_TOOL_JSON_DEPTH - 1)}${"]".repeat(MAX_TOOL_JSON_DEPTH - 1)}}`, ["calc"], ctxFor());
    expect(atLimit.result).toMatchObject({ error: { code: "invalid_arguments", message: expect.stringContaining("expression") } });
  });

  it.each([
    ["a parameter of the wrong type", '{"expression": 5}'],
    ["a missing parameter", "{}"],
    ["JSON that is not an object", "[1, 2]"],
    ["JSON null", "null"],
  ])("answers invalid_arguments for %s", async (_name, args) => {
    const outcome = await registry.call("calc_evaluate", args, ["calc"], ctxFor());
    expect(outcome.ok).toBe(false);
    expect(outcome.result).toMatchObject({ error: { code: "invalid_arguments" } });
  });

  it.each([
    ["an array", "[1, 2]"],
    ["a string", '"x"'],
    ["null", "null"],
    ["a number", "5"],
    ["an unknown key", '{"tz": "UTC"}'],
  ])("refuses clock_now arguments that are %s (its parameters are all optional), uncharged", async (_name, args) => {
    const outcome = await registry.call("clock_now", args, ["clock"], ctxFor());
    expect(outcome).toMatchObject({ ok: false, charged: false, result: { error: { code: "invalid_arguments" } } });
  });

  it("takes a parameter set to null as absent, as models in strict mode send optional ones", async () => {
    const outcome = await registry.call("clock_now", '{"timezone": null}', ["clock"], ctxFor());
    expect(outcome).toMatchObject({ ok: true, params: { timezone: null }, result: { iso: expect.stringMatching(/Z$/) } });
    expect(outcome.result).not.toHaveProperty("timezone");
    // A required one set to null is missing.
    expect((await registry.call("calc_evaluate", '{"expression": null}', ["calc"], ctxFor())).result).toMatchObject({ error: { code: "invalid_arguments" } });
  });

  it("advertises parameters without room for other keys", () => {
    for (const def of registry.definitions(ALL)) {
      if (def.type !== "function") throw new Error("expected function tools only");
      expect([def.function.name, def.function.parameters?.additionalProperties]).toEqual([def.function.name, false]);
    }
  });

  it.each(["calc_unknown", "nosuch_tool", "calc", "", "memory_delete"])("answers unknown_tool for the unknown function '%s'", async (name) => {
    const outcome = await registry.call(name, "{}", ALL, ctxFor());
    expect(outcome.ok).toBe(false);
    expect(outcome.result).toMatchObject({ error: { code: "unknown_tool", message: expect.any(String) } });
  });

  it("answers unknown_tool for a function of a tool the agent did not enable", async () => {
    const outcome = await registry.call("calc_evaluate", '{"expression":"1+1"}', ["memory", "clock"], ctxFor());
    expect(outcome).toMatchObject({ tool: "calc", action: "evaluate", ok: false, result: { error: { code: "unknown_tool" } } });
  });

  it("turns the tool's own error into an error result", async () => {
    const outcome = await registry.call("calc_evaluate", '{"expression":"2+"}', ["calc"], ctxFor());
    expect(outcome).toMatchObject({ ok: false, result: { error: { code: "invalid_expression" } } });
    const http = await registry.call("http_get", '{"url":"http://example.com/"}', ["http"], ctxFor());
    expect(http).toMatchObject({ ok: false, result: { error: { code: "host_not_allowed" } } });
  });

  it("answers no_user for memory without the run's user_id", async () => {
    const outcome = await registry.call("memory_save", '{"content":"likes tea"}', ["memory"], ctxFor());
    expect(outcome).toMatchObject({ tool: "memory", action: "save", ok: false, result: { error: { code: "no_user" } } });
  });

  it("answers unavailable when the memory service is down", async () => {
    const ctx = ctxFor({ userId: "u1" });
    const save = await registry.call("memory_save", '{"content":"likes tea","category":"preference"}', ["memory"], ctx);
    expect(save).toMatchObject({ tool: "memory", action: "save", params: { content: "likes tea", category: "preference" }, ok: false });
    expect(save.result).toEqual({ error: { code: "unavailable", message: "memory service unavailable" } });
    const search = await registry.call("memory_search", '{"query":"tea"}', ["memory"], ctx);
    expect(search.result).toMatchObject({ error: { code: "unavailable" } });
  });

  it("rethrows instead of answering when the run was aborted", async () => {
    const run = new AbortController();
    const reason = new Error("run cancelled");
    run.abort(reason);
    await expect(registry.call("memory_save", '{"content":"likes tea"}', ["memory"], ctxFor({ userId: "u1", signal: run.signal }))).rejects.toBe(reason);
  });
});

describe("error messages that quote what the model sent", () => {
  const local = new ToolRegistry({ timeoutMs: 2000, maxBytes: 1000, allowPrivate: true });
  // Each message is cut at its limit, here within an emoji: half of one would make the next
  // model request one that strict providers refuse.
  it.each([
    ["calc_evaluate", (pad: string) => ({ expression: `number("${pad}${"😀".repeat(200)}")` })],
    ["http_get", (pad: string) => ({ url: `http://127.0.0.1:1/${pad}${"😀".repeat(1000)}` })],
    ["clock_now", (pad: string) => ({ [`k${pad}${"😀".repeat(1000)}`]: 1 })],
  ] as const)("%s: whole characters only, cut or not", async (name, args) => {
    for (const pad of ["", "x"]) {
      // A port nobody listens on, reached as a private address may be here: fetch_failed quotes the URL.
      const outcome = await local.call(name, JSON.stringify(args(pad)), ["calc", "http", "clock"], ctxFor({ httpAllowlist: ["127.0.0.1"] }));
      const message = (outcome.result as { error: { message: string } }).error.message;
      expect(message.length).toBeGreaterThan(100);
      expect(message.isWellFormed()).toBe(true);
    }
  });
});

describe("which calls are charged", () => {
  // The http tool may reach the local site here; everything else as in production.
  const open = new ToolRegistry({ timeoutMs: 300, maxBytes: 1000, allowPrivate: true });
  // For calls the site answers at once (a reset, a 500): on a loaded machine 300 ms can pass first.
  const patient = new ToolRegistry({ timeoutMs: 10_000, maxBytes: 1000, allowPrivate: true });
  // The real memory service, frozen (SIGSTOP) while a call waits for it.
  let memoryService: MemoryService;
  beforeAll(async () => {
    memoryService = await startMemoryService();
  });
  afterAll(async () => {
    await memoryService?.stop();
  });
  const hangingMemory = () => createMemoryClient({ baseUrl: memoryService.url, token: memoryService.token, timeoutMs: 300 });
  const host = () => new URL(siteUrl).hostname;

  it.each<[string, string, string, readonly string[], Partial<ToolContext>]>([
    ["a call that answered", "calc_evaluate", '{"expression":"6*7"}', ["calc"], {}],
    ["an invalid expression", "calc_evaluate", '{"expression":"2+"}', ["calc"], {}],
    ["an unknown time zone", "clock_now", '{"timezone":"Mars/Olympus"}', ["clock"], {}],
  ])("charges %s: the tool ran", async (_name, fn, args, enabled, extra) => {
    const outcome = await open.call(fn, args, enabled, ctxFor(extra));
    expect(outcome.charged).toBe(true);
  });

  it("cuts an error message longer than MAX_TOOL_ERROR_CHARS (a failed fetch quotes its URL of up to 2,048 characters)", async () => {
    const url = `${siteUrl}/reset?q=${"x".repeat(2000)}`;
    const outcome = await patient.call("http_get", JSON.stringify({ url }), ["http"], ctxFor({ httpAllowlist: [host()] }));
    const { code, message } = (outcome.result as { error: { code: string; message: string } }).error;
    expect(code).toBe("fetch_failed");
    expect(message.startsWith(`Fetching ${url.slice(0, 100)}`)).toBe(true);
    expect(message).toHaveLength(MAX_TOOL_ERROR_CHARS + 1);
    expect(message.endsWith("…")).toBe(true);
  });

  it("charges an http_get to an allowed host that answers 500 or does not answer: the tool ran", async () => {
    const failed = await patient.call("http_get", JSON.stringify({ url: `${siteUrl}/fail` }), ["http"], ctxFor({ httpAllowlist: [host()] }));
    expect(failed).toMatchObject({ ok: true, result: { status: 500 }, charged: true });
    const silent = await open.call("http_get", JSON.stringify({ url: `${siteUrl}/hang` }), ["http"], ctxFor({ httpAllowlist: [host()] }));
    expect(silent).toMatchObject({ ok: false, result: { error: { code: "timeout" } }, charged: true });
  });

  it.each<[string, string, string, readonly string[], Partial<ToolContext>, string]>([
    ["an unknown function", "weather_get", "{}", ALL, {}, "unknown_tool"],
    ["a function of a tool the agent did not enable", "calc_evaluate", '{"expression":"1+1"}', ["clock"], {}, "unknown_tool"],
    ["arguments that are not JSON", "calc_evaluate", "{oops", ["calc"], {}, "invalid_arguments"],
    ["arguments that do not fit the tool", "calc_evaluate", '{"expression":5}', ["calc"], {}, "invalid_arguments"],
    ["a host not on the allow-list", "http_get", '{"url":"http://example.com/"}', ["http"], {}, "host_not_allowed"],
    ["a URL that is not http or https", "http_get", '{"url":"ftp://example.com/x"}', ["http"], { httpAllowlist: ["example.com"] }, "invalid_url"],
    ["memory without the run's user", "memory_search", '{"query":"tea"}', ["memory"], {}, "no_user"],
    ["the memory service down", "memory_save", '{"content":"likes tea"}', ["memory"], { userId: "u1" }, "unavailable"],
  ])("does not charge %s", async (_name, fn, args, enabled, extra, code) => {
    const outcome = await open.call(fn, args, enabled, ctxFor(extra));
    expect(outcome).toMatchObject({ ok: false, result: { error: { code } }, charged: false });
  });

  it("does not charge a private address refused by the http tool, nor a memory service that times out", async () => {
    const privateAddress = await registry.call("http_get", JSON.stringify({ url: `${siteUrl}/fail` }), ["http"], ctxFor({ httpAllowlist: [host()] }));
    expect(privateAddress).toMatchObject({ result: { error: { code: "address_not_allowed" } }, charged: false });
    // Answering while it runs: the same call goes through.
    const answering = createMemoryClient({ baseUrl: memoryService.url, token: memoryService.token, timeoutMs: 20_000 });
    expect(await open.call("memory_search", '{"query":"tea"}', ["memory"], ctxFor({ userId: "u1", memory: answering }))).toMatchObject({ ok: true, charged: true });
    memoryService.freeze();
    try {
      const timedOut = await open.call("memory_search", '{"query":"tea"}', ["memory"], ctxFor({ userId: "u1", memory: hangingMemory() }));
      expect(timedOut).toMatchObject({ result: { error: { code: "unavailable" } }, charged: false });
    } finally {
      memoryService.thaw();
    }
  });
});
