import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import OpenAI from "openai";
import { Agent } from "undici";
import { eventually, within } from "@agentrun/testing";
import { createModelFetch, ERROR_BODY_MAX_BYTES } from "./model-fetch";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const chunk = (content: string) => `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content } }] })}\n\n`;

describe("createModelFetch with the openai SDK", () => {
  let server: Server;
  let baseURL: string;
  let handler: Handler;
  const seen: { method?: string; url?: string; auth?: string; body?: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
        handler(req, res, body);
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await agent.close();
  });
  beforeEach(() => (seen.length = 0));

  const client = (opts: { maxRetries?: number; timeout?: number; baseURL?: string } = {}) =>
    new OpenAI({ baseURL: opts.baseURL ?? baseURL, apiKey: "k", maxRetries: opts.maxRetries ?? 0, timeout: opts.timeout ?? 5000, fetch: createModelFetch(agent) });

  const create = (c: OpenAI, options?: { signal?: AbortSignal }) =>
    c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true }, options);

  it("sends the SDK's request and streams the chunks in order", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "x-request-id": "req-1" });
      // Split across writes, one event cut in the middle.
      const all = chunk("Hel") + chunk("lo") + chunk(" there") + "data: [DONE]\n\n";
      res.write(all.slice(0, 50));
      setTimeout(() => res.end(all.slice(50)), 5);
    };
    const stream = await create(client());
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello there");
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: "POST", url: "/v1/chat/completions", auth: "Bearer k" });
    expect(JSON.parse(seen[0]!.body!)).toMatchObject({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] });
  });

  it("turns an error status into the SDK's APIError with the body's message", async () => {
    handler = (_req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "bad model", type: "invalid_request_error" } }));
    };
    const err = await create(client()).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.status).toBe(400);
    expect(err.message).toContain("bad model");
  });

  it("gives the SDK an error body of another shape whole as its message, with its type and code (Mistral, FastAPI, vLLM)", async () => {
    const mistral = { object: "error", message: { detail: [{ type: "extra_forbidden", loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" }] }, type: "invalid_request_message_error", code: null };
    const vllm = { object: "error", message: "This model's maximum context length is 8192 tokens.", type: "BadRequestError", code: 400 };
    for (const [status, body] of [[422, mistral], [400, vllm], [400, { detail: "Not found" }]] as const) {
      handler = (_req, res) => void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      const err = await create(client()).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.status).toBe(status);
      expect(err.message).toBe(`${status} ${JSON.stringify(body)}`);
      expect([err.type, err.code]).toEqual([(body as { type?: string }).type, body === vllm ? 400 : undefined]);
    }
    // A body that is not JSON stays the message as it was.
    handler = (_req, res) => void res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad gateway</html>");
    expect((await create(client()).catch((e) => e)).message).toBe("502 <html>Bad gateway</html>");
  });

  it("reads no more of an error's body than ERROR_BODY_MAX_BYTES, and closes an endless one", async () => {
    let closed = false;
    handler = (_req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      // An error page that never ends.
      const page = "<p>bad gateway</p>".repeat(4096);
      const more = () => {
        if (res.destroyed) return;
        res.write(page, () => setImmediate(more));
      };
      res.on("close", () => (closed = true));
      more();
    };
    const err = await create(client({ timeout: 20_000 })).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(502);
    expect(err.message.length).toBeLessThanOrEqual(ERROR_BODY_MAX_BYTES + 100);
    await eventually(async () => closed);
  });

  it("decodes an answer sent in a content coding the request did not ask for (gzip, deflate, br)", async () => {
    const stream = chunk("Hel") + chunk("lo") + "data: [DONE]\n\n";
    for (const [coding, encode] of [
      ["gzip", gzipSync],
      ["deflate", deflateSync],
      ["br", brotliCompressSync],
    ] as const) {
      handler = (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": coding });
        // Split across writes.
        const bytes = encode(Buffer.from(stream));
        res.write(bytes.subarray(0, 7));
        setTimeout(() => res.end(bytes.subarray(7)), 5);
      };
      let text = "";
      for await (const c of await create(client())) text += c.choices[0]?.delta.content ?? "";
      expect([coding, text]).toEqual([coding, "Hello"]);
    }
    // A whole answer, and an error's message.
    handler = (_req, res) => void res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" }).end(gzipSync(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "whole" }, finish_reason: "stop" }] })));
    const whole = await client().chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(whole.choices[0]?.message.content).toBe("whole");
    handler = (_req, res) => void res.writeHead(400, { "content-type": "application/json", "content-encoding": "gzip" }).end(gzipSync(JSON.stringify({ error: { message: "compressed refusal" } })));
    expect((await create(client()).catch((e) => e)).message).toContain("compressed refusal");
  });

  it("fails the read of an answer that is not what its content coding says, rather than waiting", async () => {
    handler = (_req, res) => void res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" }).end(chunk("not gzip"));
    const read = (async () => {
      for await (const c of await create(client())) void c;
    })();
    const outcome = await within(read.then(() => "ended", (e: Error) => e), 3000);
    // (zlib's error, made outside the test's realm: matched by its code, not its class.)
    expect(outcome).toMatchObject({ code: "Z_DATA_ERROR" });
  });

  it("lets the SDK retry a 503 and read the next answer", async () => {
    let calls = 0;
    handler = (_req, res) => {
      if (calls++ === 0) {
        res.writeHead(503, { "content-type": "application/json", "retry-after-ms": "10" });
        res.end(JSON.stringify({ error: { message: "busy" } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chunk("ok") + "data: [DONE]\n\n");
    };
    const stream = await create(client({ maxRetries: 1 }));
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    expect(text).toBe("ok");
    expect(seen).toHaveLength(2);
  });

  it("stops reading and closes the connection when the caller aborts mid-stream", async () => {
    const closed = new Promise<void>((resolve) => {
      handler = (req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(chunk("first"));
        res.on("close", () => resolve());
      };
    });
    const abort = new AbortController();
    const stream = await create(client(), { signal: abort.signal });
    const got: string[] = [];
    const reading = (async () => {
      for await (const c of stream) {
        got.push(c.choices[0]?.delta.content ?? "");
        abort.abort("cancel");
      }
    })();
    await expect(within(reading.then(() => "ended", () => "ended"), 3000)).resolves.toBe("ended");
    expect(got).toEqual(["first"]);
    await expect(within(closed.then(() => "closed"), 3000)).resolves.toBe("closed");
  });

  it("reports a server that does not answer in time as a connection timeout", async () => {
    handler = () => {}; // never answers
    const err = await create(client({ timeout: 200 })).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
  });

  it("passes what the SDK does not send for chat completions (a Request object) to the global fetch", async () => {
    handler = (_req, res) => res.end("pong");
    const modelFetch = createModelFetch(agent);
    const res = await modelFetch(new Request(`${baseURL}/ping`, { method: "POST", body: "ping" }));
    expect(res.status).toBe(200);
    await expect(res.text()).resolves.toBe("pong");
    expect(seen[0]).toMatchObject({ method: "POST", url: "/v1/ping", body: "ping" });
  });

  it("reports a refused connection as a connection error", async () => {
    const closedServer = createServer();
    closedServer.listen(0, "127.0.0.1");
    await once(closedServer, "listening");
    const port = (closedServer.address() as AddressInfo).port;
    await new Promise<void>((r) => closedServer.close(() => r()));
    const err = await create(client({ baseURL: `http://127.0.0.1:${port}/v1` })).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIConnectionError);
  });
});
