import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { callModel, MAX_REPORTED_TOKENS, MAX_TOOL_CALLS_PER_ANSWER, type ModelCallOptions, type ModelUsage } from "./model-call";
import { RunFailure } from "./run-failure";

// A provider's stream as raw chunks: the SDK reads them over HTTP as from any hosted model.
const chunk = (delta: object, usage?: object) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: usage ? [] : [{ index: 0, delta }], ...(usage ? { usage } : {}) })}\n\n`;

describe("callModel", () => {
  let server: Server;
  let client: OpenAI;
  let script: string[] = [];
  // Pause before each part of the script, as a model that streams slowly.
  let gapMs = 0;
  // Answers to give before the script, one per request (e.g. a 503 that asks for a retry).
  let refusals: { status: number; headers: Record<string, string> }[] = [];
  // Pause before the response headers, as a model that has not accepted the request yet.
  let headersAfterMs = 0;
  let requests = 0;

  beforeAll(async () => {
    server = createServer(async (_req, res) => {
      requests++;
      const refusal = refusals.shift();
      if (refusal) {
        res.writeHead(refusal.status, { "content-type": "application/json", ...refusal.headers });
        res.end(JSON.stringify({ error: { message: "busy", type: "server_error" } }));
        return;
      }
      if (headersAfterMs) await new Promise((r) => setTimeout(r, headersAfterMs));
      if (res.destroyed) return;
      res.writeHead(200, { "content-type": "text/event-stream" });
      // The headers leave at once, before the first chunk, as a provider's do.
      res.flushHeaders();
      for (const part of script) {
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
        if (res.destroyed) return;
        res.write(part);
      }
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

  beforeEach(() => {
    script = [];
    gapMs = 0;
    refusals = [];
    headersAfterMs = 0;
    requests = 0;
  });

  async function call(opts: Partial<ModelCallOptions> = {}) {
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
      ...opts,
    });
    return { turn, texts, usages };
  }

  /** How `call` failed, and after how long. */
  async function failure(opts: Partial<ModelCallOptions>): Promise<{ err: unknown; ms: number }> {
    const t0 = Date.now();
    const err = await call(opts).then(
      () => null,
      (e: unknown) => e,
    );
    return { err, ms: Date.now() - t0 };
  }

  it("keeps a surrogate pair split across two chunks whole, and replaces lone surrogates and U+0000", async () => {
    script = [chunk({ content: "smile \ud83d" }), chunk({ content: "\ude00!" }), chunk({ content: "a\u0000b\udc00" }), chunk({ content: "end \ud83d" })];
    const { turn, texts } = await call();
    expect(texts).toEqual(["smile ", "\ud83d\ude00!", "a\uFFFDb\uFFFD", "end ", "\uFFFD"]);
    expect(turn.text).toBe("smile \u{1F600}!a\uFFFDb\uFFFDend \uFFFD");
    expect(turn.text.isWellFormed()).toBe(true);
  });

  /** The first delta of a tool call at `index`, with the name and arguments whole. */
  const toolCall = (index: number, id: string | undefined, name = "calc") =>
    chunk({ tool_calls: [{ index, ...(id === undefined ? {} : { id }), type: "function", function: { name, arguments: "{}" } }] });

  it(`takes up to ${MAX_TOOL_CALLS_PER_ANSWER} tool calls from one answer`, async () => {
    script = Array.from({ length: MAX_TOOL_CALLS_PER_ANSWER }, (_, i) => toolCall(i, `call_${i}`));
    const { turn } = await call();
    expect(turn.toolCalls).toHaveLength(MAX_TOOL_CALLS_PER_ANSWER);
    expect(turn.toolCalls.at(-1)).toEqual({ id: `call_${MAX_TOOL_CALLS_PER_ANSWER - 1}`, name: "calc", arguments: "{}" });
  });

  it("fails with model_bad_response at the first tool call beyond the limit, reporting what was read", async () => {
    script = Array.from({ length: MAX_TOOL_CALLS_PER_ANSWER + 1 }, (_, i) => toolCall(i, `call_${i}`));
    const usages: ModelUsage[] = [];
    const { err } = await failure({ onUsage: (u) => usages.push(u) });
    expect(err).toBeInstanceOf(RunFailure);
    expect(err).toMatchObject({
      code: "model_bad_response",
      message: `The model requested more than ${MAX_TOOL_CALLS_PER_ANSWER} tool calls in one answer.`,
    });
    // Once, as an estimate: 64 × ("calc" + "{}") = 384 characters.
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 96 }]);
  });

  it("fails with model_bad_response on chunks of the wrong shape, not with a TypeError's model_error", async () => {
    const shapes: [string, string][] = [
      ["data: null\n\n", "The model sent a malformed streaming response."],
      [chunk({ tool_calls: {} }), "The model sent tool calls that are not a list."],
      [chunk({ tool_calls: [null] }), "The model sent a tool call that is not an object."],
      [chunk({ content: { text: "hi" } }), "The model sent an answer delta that is not text."],
      [chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: 5, arguments: "{}" } }] }), "The model requested a tool call without a name."],
    ];
    for (const [part, message] of shapes) {
      script = [part];
      const { err } = await failure({});
      expect(err).toBeInstanceOf(RunFailure);
      expect(err).toMatchObject({ code: "model_bad_response", message });
    }
  });

  it("reports what a call the model accepted consumed when it fails, and nothing for a call the model refused", async () => {
    script = [chunk({ content: "half an answer" }), "data: {oops\n\n"];
    const usages: ModelUsage[] = [];
    expect((await failure({ onUsage: (u) => usages.push(u) })).err).toMatchObject({ code: "model_bad_response" });
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 4 }]);
    refusals = [{ status: 500, headers: {} }];
    const refused: ModelUsage[] = [];
    expect((await failure({ onUsage: (u) => refused.push(u) })).err).toMatchObject({ code: "model_error" });
    expect(refused).toEqual([]);
  });

  it("takes the text parts of content sent as a list of parts, as Mistral's reasoning models send it", async () => {
    script = [
      chunk({ role: "assistant", content: [{ type: "thinking", thinking: [{ type: "text", text: "The user greets me." }] }] }),
      chunk({ content: [{ type: "text", text: "Hello" }] }),
      chunk({ content: [{ type: "text", text: " there" }, { type: "reference", reference_ids: [1] }] }),
      chunk({ content: "!" }),
    ];
    const { turn, texts } = await call();
    expect(texts).toEqual(["Hello", " there", "!"]);
    expect(turn.text).toBe("Hello there!");
  });

  it("gives each tool call an id of its own when the model repeats one or sends none", async () => {
    script = [toolCall(0, "dup"), toolCall(1, "dup"), toolCall(2, undefined), toolCall(3, "call_1"), toolCall(4, "")];
    const { turn } = await call();
    expect(turn.toolCalls.map((c) => c.id)).toEqual(["dup", "call_1_2", "call_2", "call_1", "call_4"]);
  });

  it("gives made-up ids that no earlier call of the conversation (this run's earlier steps) has", async () => {
    const earlier = (id: string) => ({ role: "assistant" as const, content: "", tool_calls: [{ id, type: "function" as const, function: { name: "calc", arguments: "{}" } }] });
    const messages = [
      { role: "user" as const, content: "12345678" },
      earlier("call_0"),
      { role: "tool" as const, tool_call_id: "call_0", content: "{}" },
      earlier("call_1"),
      { role: "tool" as const, tool_call_id: "call_1", content: "{}" },
    ];
    script = [toolCall(0, undefined), toolCall(1, "call_1"), toolCall(2, "fresh")];
    const { turn } = await call({ messages });
    expect(turn.toolCalls.map((c) => c.id)).toEqual(["call_0_2", "call_1_2", "fresh"]);
  });

  it.each([
    ["negative counts", { prompt_tokens: -5000, completion_tokens: -5000, total_tokens: -10000 }, { promptTokens: 2, completionTokens: 3 }],
    ["null counts", { prompt_tokens: null, completion_tokens: null }, { promptTokens: 2, completionTokens: 3 }],
    ["counts that are strings", { prompt_tokens: "abc", completion_tokens: "7", total_tokens: "zz" }, { promptTokens: 2, completionTokens: 3 }],
    ["one count missing", { completion_tokens: 11 }, { promptTokens: 2, completionTokens: 11 }],
    ["fractions", { prompt_tokens: 1.5, completion_tokens: 2.5 }, { promptTokens: 2, completionTokens: 3 }],
    ["counts beyond any model's window", { prompt_tokens: 1e12, completion_tokens: 3_000_000_000 }, { promptTokens: MAX_REPORTED_TOKENS, completionTokens: MAX_REPORTED_TOKENS }],
  ])("takes a model's usage with %s only as counts: estimates the rest, caps the huge", async (_name, usage, expected) => {
    // "12345678" → 2 prompt tokens; "abcdefghi" → 3 completion tokens, when estimated.
    script = [chunk({ content: "abcdefghi" }), chunk({}, usage)];
    expect((await call()).usages).toEqual([expected]);
  });

  it("estimates a count the model sent as a number too large to be finite", async () => {
    // JSON.parse reads 1e400 as Infinity.
    script = [chunk({ content: "abcdefghi" }), chunk({}, { prompt_tokens: 123456789, completion_tokens: 4 }).replace("123456789", "1e400")];
    expect((await call()).usages).toEqual([{ promptTokens: 2, completionTokens: 4 }]);
  });

  it("reports the model's usage, or an estimate at four characters per token when it sends none", async () => {
    script = [chunk({ content: "abcdefghi" }), chunk({}, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 })];
    expect((await call()).usages).toEqual([{ promptTokens: 7, completionTokens: 3 }]);
    script = [chunk({ content: "abcdefghi" })];
    // "12345678" → 2 prompt tokens; "abcdefghi" → 3 completion tokens.
    expect((await call()).usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
  });

  /** A call cancelled `afterMs` after it started: how it failed and the usage it reported. */
  async function cancelledAfter(afterMs: number) {
    const run = new AbortController();
    const timer = setTimeout(() => run.abort("cancel"), afterMs);
    const usages: ModelUsage[] = [];
    const { err } = await failure({ signal: run.signal, onUsage: (u) => usages.push(u) });
    clearTimeout(timer);
    return { err, usages };
  }

  it("reports the prompt's estimate for a call cancelled after the model accepted it, before its first chunk", async () => {
    script = [chunk({ content: "late" })];
    gapMs = 2000;
    const { err, usages } = await cancelledAfter(200);
    expect(err).toMatchObject({ code: "cancel" });
    // "12345678" → 2 prompt tokens; nothing streamed yet.
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 0 }]);
  });

  it("reports what was streamed for a call cancelled while the model was answering", async () => {
    script = [chunk({ content: "abcdefghi" }), chunk({ content: "late" })];
    gapMs = 300;
    const { usages } = await cancelledAfter(450);
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
  });

  it("reports nothing for a call cancelled before the model accepted it (no response headers yet)", async () => {
    script = [chunk({ content: "late" })];
    headersAfterMs = 2000;
    const { err, usages } = await cancelledAfter(200);
    expect(err).toMatchObject({ code: "cancel" });
    expect(usages).toEqual([]);
  });

  it("ends a call still streaming at timeoutMs with model_timeout, though chunks keep arriving within the idle timeout", async () => {
    script = Array.from({ length: 12 }, (_, i) => chunk({ content: `part ${i} ` }));
    gapMs = 150;
    const { err, ms } = await failure({ timeoutMs: 600, idleTimeoutMs: 1000 });
    expect(err).toBeInstanceOf(RunFailure);
    expect(err).toMatchObject({ code: "model_timeout", message: "The model call took longer than 600 ms." });
    expect(ms).toBeGreaterThanOrEqual(550);
    // Before the stream would have ended by itself (12 × 150 ms).
    expect(ms).toBeLessThan(12 * 150);
  });

  it("fails at once with the model's refusal when the wait it asks for is longer than the call has left", async () => {
    refusals = [{ status: 503, headers: { "retry-after-ms": "10000" } }];
    script = [chunk({ content: "late" })];
    const { err, ms } = await failure({ timeoutMs: 2000, maxRetries: 1 });
    expect(err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    expect(ms).toBeLessThan(1000);
    expect(requests).toBe(1);
    // A 429 asking for 40 s: rate limited, as the model said, not a timeout after waiting.
    refusals = [{ status: 429, headers: { "retry-after": "40" } }];
    const limited = await failure({ timeoutMs: 30_000, idleTimeoutMs: 300, maxRetries: 2 });
    expect(limited.err).toMatchObject({ code: "model_rate_limited", message: "The model answered 429: the request was rate limited." });
    expect(limited.ms).toBeLessThan(1000);
  });

  it("waits as long as the model asks before a retry, with no idle timeout during the wait", async () => {
    refusals = [
      { status: 429, headers: { "retry-after-ms": "400" } },
      { status: 503, headers: { "retry-after": "0.3" } },
    ];
    script = [chunk({ content: "third time" })];
    const t0 = Date.now();
    const { turn } = await call({ timeoutMs: 5000, idleTimeoutMs: 250, maxRetries: 2 });
    expect(turn.text).toBe("third time");
    expect(requests).toBe(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650);
  });

  it("counts the retries' waits in timeoutMs: no fresh budget per attempt", async () => {
    refusals = Array.from({ length: 5 }, () => ({ status: 503, headers: { "retry-after-ms": "150" } }));
    script = [chunk({ content: "late" })];
    const { err, ms } = await failure({ timeoutMs: 400, maxRetries: 5 });
    expect(err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    // Two waits of 150 ms fit in 400 ms; the third would not.
    expect(requests).toBe(3);
    expect(ms).toBeLessThan(400);
  });

  it("does not retry what the model says not to, nor a refusal that a retry cannot change", async () => {
    refusals = [{ status: 503, headers: { "x-should-retry": "false" } }];
    expect((await failure({ maxRetries: 2 })).err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    expect(requests).toBe(1);
    refusals = [{ status: 400, headers: {} }];
    expect((await failure({ maxRetries: 2 })).err).toMatchObject({ code: "model_error", message: "The model answered 400." });
    expect(requests).toBe(2);
  });

  it("retries within timeoutMs and answers", async () => {
    refusals = [{ status: 503, headers: { "retry-after-ms": "100" } }];
    script = [chunk({ content: "second time" })];
    const { turn } = await call({ timeoutMs: 2000, maxRetries: 1 });
    expect(turn.text).toBe("second time");
    expect(requests).toBe(2);
  });
});
