import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createMemoryClient } from "@agentrun/memory-client";
import { httpGetAction, type HttpToolLimits } from "./http.tool";
import { MAX_TOOL_JSON_DEPTH, ToolError, type ToolContext } from "./tool";

describe("http_get against a real server on 127.0.0.1", () => {
  type Handler = (req: IncomingMessage, res: ServerResponse) => void;
  let server: Server;
  let base: string;
  let handler: Handler;
  let memoryUrl: string;

  beforeAll(async () => {
    server = createServer((req, res) => handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // A port nobody listens on for the memory client, which this tool never calls.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    memoryUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
  });

  afterEach(() => server.closeAllConnections());
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const limits: HttpToolLimits = { timeoutMs: 300, maxBytes: 1000, allowPrivate: true };
  const ctxFor = (httpAllowlist: string[], signal = new AbortController().signal): ToolContext => ({
    orgId: "org_test",
    runId: "run_test",
    agentId: "agt_test",
    httpAllowlist,
    memory: createMemoryClient({ baseUrl: memoryUrl, token: "t" }),
    signal,
  });
  const get = (url: string, opts: { limits?: Partial<HttpToolLimits>; allowlist?: string[]; signal?: AbortSignal } = {}) =>
    httpGetAction({ ...limits, ...opts.limits }).run({ url }, ctxFor(opts.allowlist ?? ["127.0.0.1"], opts.signal));

  /** The ToolError `p` rejects with. */
  async function failure(p: Promise<unknown>): Promise<ToolError> {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ToolError);
    return err as ToolError;
  }

  it("is the http tool's get action", () => {
    const action = httpGetAction(limits);
    expect([action.tool, action.action]).toEqual(["http", "get"]);
  });

  it("fetches JSON and returns the status, content type and parsed body", async () => {
    const seen: Array<{ method?: string; url?: string; agent?: string }> = [];
    handler = (req, res) => {
      seen.push({ method: req.method, url: req.url, agent: req.headers["user-agent"] });
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify({ ok: true, items: [1, 2] }));
    };
    await expect(get(`${base}/data?x=1`)).resolves.toEqual({ status: 200, content_type: "application/json; charset=utf-8", body: { ok: true, items: [1, 2] }, truncated: false });
    expect(seen).toEqual([{ method: "GET", url: "/data?x=1", agent: "agentrun-http-tool/1" }]);
  });

  it("returns a non-JSON body as text, and error statuses as results", async () => {
    handler = (_req, res) => void res.writeHead(404, { "content-type": "text/plain" }).end("no such page");
    await expect(get(`${base}/missing`)).resolves.toEqual({ status: 404, content_type: "text/plain", body: "no such page", truncated: false });
  });

  it.each([
    ["ISO-8859-1", "text/plain; charset=ISO-8859-1", Buffer.from([0x63, 0x61, 0x66, 0xe9]), "café"],
    // As a browser reads it: the bytes 0x80–0x9F of windows-1252, which pages labelled Latin-1 use.
    ["ISO-8859-1 with curly quotes", "text/plain; charset=iso-8859-1", Buffer.from([0x93, 0x68, 0x69, 0x94]), "“hi”"],
    ["KOI8-R", "text/plain; charset=koi8-r", Buffer.from([0xf0, 0xd2, 0xc9, 0xd7, 0xc5, 0xd4]), "Привет"],
    ["a quoted Shift_JIS", 'text/html;charset="Shift_JIS"', Buffer.from([0x93, 0xfa, 0x96, 0x7b]), "日本"],
    ["windows-1252", "text/plain; charset=windows-1252", Buffer.from([0x80, 0x20, 0x35]), "€ 5"],
    ["no charset (UTF-8)", "text/plain", Buffer.from("café", "utf8"), "café"],
    ["a charset without a decoder (read as UTF-8)", "text/plain; charset=x-unknown-7", Buffer.from("café", "utf8"), "café"],
  ])("decodes a body in %s", async (_name, type, bytes, text) => {
    handler = (_req, res) => void res.writeHead(200, { "content-type": type }).end(bytes);
    await expect(get(`${base}/text`)).resolves.toMatchObject({ status: 200, body: text, truncated: false });
  });

  it.each([
    ["image/png", { "content-type": "image/png" }, 4096],
    ["a PDF with parameters", { "content-type": "application/pdf; name=report.pdf" }, 4096],
    ["application/octet-stream that holds a NUL", { "content-type": "application/octet-stream" }, 4096],
    ["no type, with a NUL in its bytes", {}, 4096],
  ])("returns no body for binary content (%s), only its size", async (_name, headers, n) => {
    const bytes = Buffer.alloc(n, 0x89);
    bytes[10] = 0;
    let sent = 0;
    handler = (_req, res) => {
      sent++;
      res.writeHead(200, { ...headers, "content-length": String(n) }).end(bytes);
    };
    const type = (headers as Record<string, string>)["content-type"] ?? "";
    await expect(get(`${base}/file`)).resolves.toEqual({ status: 200, content_type: type, body: null, binary: true, size: n, truncated: false });
    expect(sent).toBe(1);
  });

  it.each([
    ["image/svg+xml", "<svg xmlns='http://www.w3.org/2000/svg'/>"],
    ["application/xml", "<a>1</a>"],
    ["application/javascript", "let a = 1;"],
    ["application/ld+json; charset=utf-8", '{"@id":"x"}'],
    ["Application/JSON", '{"ok":true}'],
    ["application/octet-stream", "plain words"],
    ["", "plain words"],
  ])("returns the body of text content (%s) as text", async (type, text) => {
    handler = (_req, res) => void res.writeHead(200, type ? { "content-type": type } : {}).end(text);
    const result = (await get(`${base}/t`)) as { body: unknown; binary?: boolean };
    expect(result.binary).toBeUndefined();
    expect(result.body).toEqual(type.toLowerCase().includes("json") ? JSON.parse(text) : text);
  });

  it("reads the body by the last of repeated Content-Type headers, as a browser does, and a malformed one by its bytes", async () => {
    handler = (_req, res) => void res.setHeader("content-type", ["application/json", "application/json"]).end('{"ok":true}');
    await expect(get(`${base}/twice`)).resolves.toMatchObject({ status: 200, body: { ok: true } });
    handler = (_req, res) => void res.setHeader("content-type", ["image/png", "text/plain; charset=windows-1252"]).end(Buffer.from([0x80]));
    await expect(get(`${base}/last`)).resolves.toMatchObject({ status: 200, body: "€" });
    handler = (_req, res) => void res.writeHead(200, { "content-type": "text" }).end("plain words");
    await expect(get(`${base}/malformed`)).resolves.toMatchObject({ status: 200, body: "plain words" });
  });

  it("parses JSON sent in UTF-16 with a byte order mark", async () => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"name":"Zoë"}', "utf16le")]);
    handler = (_req, res) => void res.writeHead(200, { "content-type": "application/json; charset=utf-16" }).end(bytes);
    await expect(get(`${base}/utf16`)).resolves.toMatchObject({ body: { name: "Zoë" } });
  });

  it("does not follow redirects but reports them", async () => {
    handler = (_req, res) => void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data" }).end();
    await expect(get(`${base}/redirect`)).resolves.toMatchObject({ status: 302, location: "http://169.254.169.254/latest/meta-data", truncated: false });
  });

  it("truncates a large body to maxBytes and says so", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      // Several writes, so the limit falls in the middle of a chunk.
      for (let i = 0; i < 50; i++) res.write("a".repeat(1000));
      res.end();
    };
    const out = (await get(`${base}/large`, { limits: { maxBytes: 2500 } })) as { body: string; truncated: boolean; status: number };
    expect(out.status).toBe(200);
    expect(out.truncated).toBe(true);
    // Truncated JSON is not parsed: it is returned as the text it is.
    expect(out.body).toBe("a".repeat(2500));
  });

  it(`returns JSON nested more than ${MAX_TOOL_JSON_DEPTH} levels deep as text, and parses it up to that depth`, async () => {
    const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
    handler = (req, res) => void res.writeHead(200, { "content-type": "application/json" }).end(nested(req.url === "/deep" ? 400 : MAX_TOOL_JSON_DEPTH));
    // Far deeper (6,000 levels), parsed, the value would overflow the stack of storing and sending it.
    await expect(get(`${base}/deep`)).resolves.toMatchObject({ status: 200, body: nested(400), truncated: false });
    const shallow = (await get(`${base}/shallow`)) as { body: unknown };
    expect(shallow.body).toEqual(JSON.parse(nested(MAX_TOOL_JSON_DEPTH)));
  });

  it("returns a body of exactly maxBytes whole", async () => {
    handler = (_req, res) => void res.writeHead(200, { "content-type": "text/plain" }).end("b".repeat(1000));
    await expect(get(`${base}/exact`)).resolves.toMatchObject({ body: "b".repeat(1000), truncated: false });
  });

  it("gives up on a server that never answers with timeout, within timeoutMs", async () => {
    handler = () => undefined;
    const started = Date.now();
    const err = await failure(get(`${base}/hang`));
    const elapsed = Date.now() - started;
    expect(err.code).toBe("timeout");
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1500);
  });

  it("gives up on a body that stalls with timeout, within timeoutMs", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("partial");
    };
    const started = Date.now();
    expect((await failure(get(`${base}/stall`))).code).toBe("timeout");
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("rethrows when the run is aborted, instead of a tool error", async () => {
    handler = () => undefined;
    const run = new AbortController();
    const reason = new Error("run cancelled");
    setTimeout(() => run.abort(reason), 50);
    const err = await get(`${base}/hang`, { limits: { timeoutMs: 5000 }, signal: run.signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBe(reason);
  });

  it("refuses a private address unless allowPrivate is set: address_not_allowed, without connecting", async () => {
    let requests = 0;
    handler = (_req, res) => {
      requests++;
      res.end("{}");
    };
    const err = await failure(get(`${base}/data`, { limits: { allowPrivate: false } }));
    expect(err.code).toBe("address_not_allowed");
    expect(requests).toBe(0);
  });

  it("refuses a host that resolves to a private address: address_not_allowed", async () => {
    const port = new URL(base).port;
    expect((await failure(get(`http://localhost:${port}/data`, { limits: { allowPrivate: false }, allowlist: ["localhost"] }))).code).toBe("address_not_allowed");
  });

  it("refuses a host that is not on the allowlist: host_not_allowed", async () => {
    const port = new URL(base).port;
    expect((await failure(get(`${base}/data`, { allowlist: ["example.com"] }))).code).toBe("host_not_allowed");
    expect((await failure(get(`http://localhost:${port}/data`))).code).toBe("host_not_allowed");
    expect((await failure(get(`${base}/data`, { allowlist: [] }))).code).toBe("host_not_allowed");
  });

  it("refuses URLs that are not http or https: invalid_url", async () => {
    expect((await failure(get("ftp://127.0.0.1/file"))).code).toBe("invalid_url");
    expect((await failure(get("file:///etc/passwd"))).code).toBe("invalid_url");
  });

  it("reports a refused connection as fetch_failed", async () => {
    expect((await failure(get(`${memoryUrl}/nothing-here`))).code).toBe("fetch_failed");
  });
});
