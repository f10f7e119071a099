import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { callModel, type ModelUsage } from "./model-call";

// A provider's stream as raw chunks: the SDK reads them over HTTP as from any hosted model.
const chunk = (delta: object, usage?: object) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: usage ? [] : [{ index: 0, delta }], ...(usage ? { usage } : {}) })}\n\n`;

describe("callModel", () => {
  let server: Server;
  let client: OpenAI;
  let script: string[] = [];

  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const part of script) res.write(part);
      res.end("data: [DONE]\n\n");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: "none", maxRetries: 0 });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  async function call() {
    const texts: string[] = [];
    const usages: ModelUsage[] = [];
    const turn = await callModel({
      client,
      model: "m",
      messages: [{ role: "user", content: "12345678" }],
      tools: [],
      signal: new AbortController().signal,
      timeoutMs: 5000,
      idleTimeoutMs: 5000,
      maxRetries: 0,
      onText: (t) => texts.push(t),
      onUsage: (u) => usages.push(u),
    });
    return { turn, texts, usages };
  }

  it("keeps a surrogate pair split across two chunks whole, and replaces lone surrogates and U+0000", async () => {
    script = [chunk({ content: "smile \ud83d" }), chunk({ content: "\ude00!" }), chunk({ content: "a\u0000b\udc00" }), chunk({ content: "end \ud83d" })];
    const { turn, texts } = await call();
    expect(texts).toEqual(["smile ", "\ud83d\ude00!", "a\uFFFDb\uFFFD", "end ", "\uFFFD"]);
    expect(turn.text).toBe("smile \u{1F600}!a\uFFFDb\uFFFDend \uFFFD");
    expect(turn.text.isWellFormed()).toBe(true);
  });

  it("reports the model's usage, or an estimate at four characters per token when it sends none", async () => {
    script = [chunk({ content: "abcdefghi" }), chunk({}, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 })];
    expect((await call()).usages).toEqual([{ promptTokens: 7, completionTokens: 3 }]);
    script = [chunk({ content: "abcdefghi" })];
    // "12345678" → 2 prompt tokens; "abcdefghi" → 3 completion tokens.
    expect((await call()).usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
  });
});
