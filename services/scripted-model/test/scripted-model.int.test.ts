import OpenAI, { APIError } from "openai";
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { startScriptedModel, type ScriptedModelServer } from "../src/server";

const tools: ChatCompletionTool[] = [
  {
    type: "function",
    function: { name: "calc_evaluate", description: "evaluate", parameters: { type: "object", properties: { expression: { type: "string" } } } },
  },
];
const callDirective = '[call:calc_evaluate {"expression":"2+2"}]';

let model: ScriptedModelServer;
let client: OpenAI;

beforeAll(async () => {
  model = await startScriptedModel();
  // No retries: a scripted error must surface at once rather than be retried with backoff.
  client = new OpenAI({ baseURL: model.url, apiKey: "test", maxRetries: 0, logLevel: "off" });
});

afterAll(async () => {
  await model.close();
});

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const contentOf = (chunks: ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");

describe("scripted model via the openai SDK", () => {
  it("serves a base URL ending in /v1 on a free port", () => {
    expect(model.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(model.url).not.toMatch(/:0\/v1$/);
  });

  it("echoes a plain message without streaming, with usage and the requested model", async () => {
    const res = await client.chat.completions.create({ model: "any-model-name", messages: [{ role: "user", content: "hello there" }] });
    expect(res.object).toBe("chat.completion");
    expect(res.model).toBe("any-model-name");
    expect(res.choices[0]?.message.content).toBe("Echo: hello there");
    expect(res.choices[0]?.finish_reason).toBe("stop");
    // "hello there" = 11 chars → 3; "Echo: hello there" = 17 chars → 5
    expect(res.usage).toEqual({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
  });

  it("ends an answer with the finish_reason [finish:length] or [finish:content_filter] names, streamed or not, tool calls too", async () => {
    for (const reason of ["length", "content_filter"] as const) {
      const whole = await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: `[finish:${reason}] cut me` }] });
      expect([whole.choices[0]?.message.content, whole.choices[0]?.finish_reason]).toEqual(["Echo: cut me", reason]);
      const chunks = await collect(await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: `[finish:${reason}] cut me` }], stream: true }));
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe(reason);
    }
    const calls = await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[finish:length][call:clock_now]" }], tools: [{ type: "function", function: { name: "clock_now", parameters: { type: "object" } } }] });
    expect(calls.choices[0]?.finish_reason).toBe("length");
  });

  it("streams an echo in exactly [chunks:N] content chunks, then usage when asked", async () => {
    const stream = await client.chat.completions.create({
      model: "scripted",
      messages: [{ role: "user", content: "[chunks:5] streaming works" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await collect(stream);
    const contentChunks = chunks.filter((c) => (c.choices[0]?.delta.content ?? "") !== "");
    expect(contentChunks).toHaveLength(5);
    expect(contentOf(chunks)).toBe("Echo: streaming works");
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual({ prompt_tokens: 7, completion_tokens: 6, total_tokens: 13 });
  });

  it("streams in several chunks by default and without usage unless asked", async () => {
    const chunks = await collect(
      await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "default chunking" }], stream: true }),
    );
    expect(chunks.filter((c) => c.choices[0]?.delta.content)).toHaveLength(4);
    expect(contentOf(chunks)).toBe("Echo: default chunking");
    expect(chunks.some((c) => c.usage)).toBe(false);
  });

  it("reports no usage with [no-usage], streaming or not, even when asked", async () => {
    const chunks = await collect(
      await client.chat.completions.create({
        model: "scripted",
        messages: [{ role: "user", content: "[no-usage] quiet" }],
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(contentOf(chunks)).toBe("Echo: quiet");
    expect(chunks.some((c) => c.usage)).toBe(false);
    const whole = await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[no-usage] quiet" }] });
    expect(whole.choices[0]?.message.content).toBe("Echo: quiet");
    expect(whole.usage).toBeUndefined();
  });

  it("requests a tool call without streaming, then reports the tool result", async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: `please ${callDirective}` }];
    const first = await client.chat.completions.create({ model: "scripted", messages, tools });
    const choice = first.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.tool_calls).toEqual([
      { id: "call_1", type: "function", function: { name: "calc_evaluate", arguments: '{"expression":"2+2"}' } },
    ]);

    const followUp = await client.chat.completions.create({
      model: "scripted",
      tools,
      messages: [...messages, { role: "assistant", content: null, tool_calls: choice?.message.tool_calls }, { role: "tool", tool_call_id: "call_1", content: '{"value":4}' }],
    });
    expect(followUp.choices[0]?.finish_reason).toBe("stop");
    expect(followUp.choices[0]?.message.content).toBe('Tool calc_evaluate returned: {"value":4}');
  });

  it("streams tool calls as deltas the SDK assembles into name and arguments", async () => {
    const stream = client.chat.completions.stream({
      model: "scripted",
      tools,
      messages: [{ role: "user", content: `${callDirective}[call:memory_search {"q":"x"}]` }],
    });
    const argumentDeltas: string[] = [];
    stream.on("tool_calls.function.arguments.delta", (e) => argumentDeltas.push(e.arguments_delta));
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.tool_calls?.map((t) => (t.type === "function" ? [t.id, t.function.name, t.function.arguments] : null))).toEqual([
      ["call_1", "calc_evaluate", '{"expression":"2+2"}'],
      ["call_2", "memory_search", '{"q":"x"}'],
    ]);
    // The arguments really arrived in pieces (4 per call by default).
    expect(argumentDeltas.length).toBe(8);

    const followUp = await collect(
      await client.chat.completions.create({
        model: "scripted",
        stream: true,
        messages: [
          { role: "user", content: `${callDirective}[call:memory_search {"q":"x"}]` },
          { role: "assistant", content: null, tool_calls: choice?.message.tool_calls },
          { role: "tool", tool_call_id: "call_1", content: "4" },
          { role: "tool", tool_call_id: "call_2", content: "[]" },
        ],
      }),
    );
    expect(contentOf(followUp)).toBe("Tool calc_evaluate returned: 4\nTool memory_search returned: []");
  });

  it("streams a [preface] text before the tool calls of the same answer, and sends it as content without streaming", async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: `[preface][chunks:2]${callDirective} Let me calculate.` }];
    const chunks = await collect(await client.chat.completions.create({ model: "scripted", stream: true, messages, tools }));
    const firstCall = chunks.findIndex((c) => c.choices[0]?.delta.tool_calls);
    expect(contentOf(chunks.slice(0, firstCall))).toBe("Let me calculate.");
    expect(chunks.slice(firstCall).some((c) => c.choices[0]?.delta.content)).toBe(false);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe("tool_calls");

    const whole = await client.chat.completions.create({ model: "scripted", messages, tools });
    expect(whole.choices[0]?.message.content).toBe("Let me calculate.");
    expect(whole.choices[0]?.message.tool_calls?.[0]).toMatchObject({ id: "call_1", function: { name: "calc_evaluate" } });
  });

  it("answers [echo-system] with all system messages", async () => {
    const res = await client.chat.completions.create({
      model: "scripted",
      messages: [
        { role: "system", content: "You are a helpful agent." },
        { role: "system", content: "Memory: likes tea." },
        { role: "user", content: "[echo-system]" },
      ],
    });
    expect(res.choices[0]?.message.content).toBe("You are a helpful agent.\nMemory: likes tea.");
  });

  it("answers [history] with the earlier user messages", async () => {
    const res = await client.chat.completions.create({
      model: "scripted",
      messages: [
        { role: "user", content: "first" },
        { role: "assistant", content: "Echo: first" },
        { role: "user", content: [{ type: "text", text: "second" }] },
        { role: "assistant", content: "Echo: second" },
        { role: "user", content: "[history]" },
      ],
    });
    expect(res.choices[0]?.message.content).toBe("first | second");
  });

  it("surfaces [error:429] as an APIError with status 429", async () => {
    const err = await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[error:429] hi" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(429);
    expect((err as APIError).code).toBe("rate_limit_exceeded");
    expect((err as APIError).type).toBe("rate_limit_error");
  });

  it("delays each streamed chunk by [sleep:MS] and a non-streamed answer by MS once", async () => {
    let start = Date.now();
    const chunks = await collect(
      await client.chat.completions.create({ model: "scripted", stream: true, messages: [{ role: "user", content: "[sleep:50][chunks:4] slow" }] }),
    );
    const streamed = Date.now() - start;
    expect(chunks.filter((c) => c.choices[0]?.delta.content)).toHaveLength(4);
    expect(streamed).toBeGreaterThanOrEqual(4 * 50 - 10);

    // Once, not once per chunk: 300 ms against the 20 × 300 ms a streamed answer would take.
    start = Date.now();
    await client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[sleep:300][chunks:20] slow" }] });
    const whole = Date.now() - start;
    expect(whole).toBeGreaterThanOrEqual(300 - 5);
    expect(whole).toBeLessThan(20 * 300);
  });

  it("makes the SDK stream throw on [malformed]", async () => {
    const stream = await client.chat.completions.create({ model: "scripted", stream: true, messages: [{ role: "user", content: "[malformed] hi" }] });
    const seen: ChatCompletionChunk[] = [];
    const iterate = async () => {
      for await (const chunk of stream) seen.push(chunk);
    };
    await expect(iterate()).rejects.toThrow(SyntaxError);
    expect(seen).toHaveLength(1);
  });

  it("reports [stream-error] as the only event of a 200 stream, and [echo-key] repeats the key in error messages", async () => {
    const keyed = new OpenAI({ baseURL: client.baseURL, apiKey: "sk-test-echo", maxRetries: 0 });
    const stream = await keyed.chat.completions.create({ model: "scripted", stream: true, messages: [{ role: "user", content: "[stream-error][error:503][echo-key] hi" }] });
    const err = await collect(stream).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err).toMatchObject({ error: { type: "server_error", code: "service_unavailable", message: "scripted error 503: Incorrect API key provided: Bearer sk-test-echo." } });
    // Without streaming: the error status itself, 500 by default; without [echo-key], no key.
    const plain = await keyed.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[stream-error] hi" }] }).catch((e: unknown) => e);
    expect(plain).toMatchObject({ status: 500, error: { code: "server_error", message: "scripted error 500" } });
  });

  it("ends the stream cleanly after its first chunk on [cut]: no finishing chunk, no usage, no [DONE]", async () => {
    const res = await fetch(`${client.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "scripted", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "[cut][chunks:3] hello" }] }),
    });
    expect(res.status).toBe(200);
    const events = (await res.text()).split("\n\n").filter(Boolean);
    expect(events).toHaveLength(1);
    const only = JSON.parse(events[0]!.replace(/^data: /, ""));
    expect(only.choices[0]).toMatchObject({ delta: { content: "Echo" }, finish_reason: null });
    expect(only.usage).toBeNull();
  });

  it("sends a truncated JSON body for [malformed] without streaming", async () => {
    // Matched by message: the SyntaxError comes from fetch's realm, not jest's.
    await expect(client.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[malformed] hi" }] })).rejects.toThrow(/JSON/);
  });

  it("never answers [hang] until the client gives up", async () => {
    const start = Date.now();
    const err = await client.chat.completions
      .create({ model: "scripted", messages: [{ role: "user", content: "[hang]" }] }, { timeout: 200 })
      .catch((e: unknown) => e);
    // Under jest the SDK cannot recognise the timeout's cross-realm AbortError, so it reports the
    // base class APIConnectionError (of which APIConnectionTimeoutError is a subclass).
    expect(err).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(Date.now() - start).toBeGreaterThanOrEqual(190);
  });

  it("lists the scripted model", async () => {
    const page = await client.models.list();
    expect(page.data).toEqual([{ id: "scripted", object: "model", created: expect.any(Number), owned_by: "agentrun" }]);
  });
});
