import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { ModelUsage } from "./model-call";
import { MAX_ANSWER_CHARS, MAX_REASONING_CHARS, MAX_REPORTED_TOKENS, MAX_TOOL_ARGUMENTS_CHARS, MAX_TOOL_CALL_ID_CHARS, MAX_TOOL_CALLS_PER_ANSWER, MAX_TOOL_NAME_CHARS } from "./model-limits";
import { chunk, scriptedProvider, toolCall } from "./model-call.fixture";
import { RunFailure } from "./run-failure";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

// What callModel makes of a provider's answer: text, tool calls and their ids, chunks of the
// wrong shape, token usage. (Cancellation, timeouts and retries: model-call-timing.test.ts.)
describe("callModel", () => {
  const { provider, call, failure } = scriptedProvider();

  it("keeps a surrogate pair split across two chunks whole, and replaces lone surrogates and U+0000", async () => {
    provider.script = [chunk({ content: "smile \ud83d" }), chunk({ content: "\ude00!" }), chunk({ content: "a\u0000b\udc00" }), chunk({ content: "end \ud83d" })];
    const { turn, texts } = await call();
    expect(texts).toEqual(["smile ", "\ud83d\ude00!", "a\uFFFDb\uFFFD", "end ", "\uFFFD"]);
    expect(turn.text).toBe("smile \u{1F600}!a\uFFFDb\uFFFDend \uFFFD");
    expect(turn.text.isWellFormed()).toBe(true);
  });

  it("lets go of each call once it has ended, and cuts only the request of a call that failed", async () => {
    // A run's signal outlives its calls.
    const run = new AbortController();
    provider.script = [chunk({ content: "fine" })];
    expect((await call({ signal: run.signal })).turn.text).toBe("fine");
    provider.contentEncoding = "gzip";
    expect((await failure({ signal: run.signal })).err).toMatchObject({ code: "model_bad_response" });
    // An answered call's request is left alone: the SDK answers an abort with one of its own,
    // which makes a DOMException (its stack captured) per call.
    expect(provider.fetchSignals.map((s) => s.aborted)).toEqual([false, true]);
    // Nothing holds on to either call: Node keeps a combined signal that may still abort while
    // anything listens on it, and the SDK never stops listening on the signal it is given.
    const refs = provider.fetchSignals.map((s) => new WeakRef(s));
    provider.fetchSignals = [];
    for (let i = 0; i < 2; i++) {
      // (A WeakRef holds its target until the job that made or read it ends.)
      await new Promise((r) => setImmediate(r));
      gc();
    }
    expect(refs.map((r) => r.deref() === undefined)).toEqual([true, true]);
  });

  it(`takes up to ${MAX_TOOL_CALLS_PER_ANSWER} tool calls from one answer`, async () => {
    provider.script = Array.from({ length: MAX_TOOL_CALLS_PER_ANSWER }, (_, i) => toolCall(i, `call_${i}`));
    const { turn } = await call();
    expect(turn.toolCalls).toHaveLength(MAX_TOOL_CALLS_PER_ANSWER);
    expect(turn.toolCalls.at(-1)).toEqual({ id: `call_${MAX_TOOL_CALLS_PER_ANSWER - 1}`, name: "calc", arguments: "{}" });
  });

  it("fails with model_bad_response at the first tool call beyond the limit, reporting what was read", async () => {
    provider.script = Array.from({ length: MAX_TOOL_CALLS_PER_ANSWER + 1 }, (_, i) => toolCall(i, `call_${i}`));
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

  it(`fails with model_bad_response once an answer's tool call arguments pass ${MAX_TOOL_ARGUMENTS_CHARS} characters, without reading on`, async () => {
    const piece = "x".repeat(64 * 1024);
    const start = chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "calc", arguments: '{"expression":"' } }] });
    const more = chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
    // Arguments of 4 MiB, sent in pieces of 64 KiB.
    provider.script = [start, ...Array.from({ length: 64 }, () => more)];
    const { err } = await failure({});
    expect(err).toBeInstanceOf(RunFailure);
    expect(err).toMatchObject({ code: "model_bad_response", message: `The model sent tool call arguments of more than ${MAX_TOOL_ARGUMENTS_CHARS} characters in one answer.` });
    // Up to the limit, in one call or spread over several, they are taken.
    provider.script = [start, ...Array.from({ length: 14 }, () => more), chunk({ tool_calls: [{ index: 1, id: "call_2", function: { name: "calc", arguments: piece } }] })];
    const { turn } = await call();
    expect(turn.toolCalls.map((c) => c.arguments.length)).toEqual([15 + 14 * piece.length, piece.length]);
  });

  it(`fails with model_bad_response once a tool call's name passes ${MAX_TOOL_NAME_CHARS} characters or its id ${MAX_TOOL_CALL_ID_CHARS}`, async () => {
    // A name streamed in pieces that never repeat what came before: each is the next piece.
    const piece = (c: string) => chunk({ tool_calls: [{ index: 0, function: { name: c.repeat(100) } }] });
    provider.script = [chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "calc" } }] }), ...Array.from({ length: 4000 }, (_, i) => piece(i % 2 ? "a" : "b"))];
    const named = await failure({});
    expect(named.err).toMatchObject({ code: "model_bad_response", message: `The model sent a tool call name of more than ${MAX_TOOL_NAME_CHARS} characters.` });
    provider.script = [chunk({ tool_calls: [{ index: 0, id: "c".repeat(MAX_TOOL_CALL_ID_CHARS + 1), function: { name: "calc", arguments: "{}" } }] })];
    const identified = await failure({});
    expect(identified.err).toMatchObject({ code: "model_bad_response", message: `The model sent a tool call id of more than ${MAX_TOOL_CALL_ID_CHARS} characters.` });
    // At the limits, they are taken.
    provider.script = [chunk({ tool_calls: [{ index: 0, id: "c".repeat(MAX_TOOL_CALL_ID_CHARS), function: { name: "n".repeat(MAX_TOOL_NAME_CHARS), arguments: "{}" } }] })];
    const { turn } = await call();
    expect(turn.toolCalls.map((c) => [c.id.length, c.name.length])).toEqual([[MAX_TOOL_CALL_ID_CHARS, MAX_TOOL_NAME_CHARS]]);
  });

  it(`fails with model_bad_response once an answer's reasoning passes ${MAX_REASONING_CHARS} characters`, async () => {
    const thought = chunk({ reasoning_content: "x".repeat(256 * 1024) });
    provider.script = Array.from({ length: 17 }, () => thought);
    const { err } = await failure({});
    expect(err).toMatchObject({ code: "model_bad_response", message: `The model sent more than ${MAX_REASONING_CHARS} characters of reasoning in one answer.` });
    provider.script = [...Array.from({ length: 16 }, () => thought), chunk({ content: "done" })];
    const { turn } = await call();
    expect([turn.reasoning?.length, turn.text]).toEqual([MAX_REASONING_CHARS, "done"]);
  });

  it(`fails with model_bad_response once an answer's text passes ${MAX_ANSWER_CHARS} characters`, async () => {
    const said = chunk({ content: "x".repeat(1024 * 1024) });
    provider.script = Array.from({ length: 17 }, () => said);
    const texts: string[] = [];
    const { err } = await failure({ onText: (t) => texts.push(t) });
    expect(err).toMatchObject({ code: "model_bad_response", message: `The model sent more than ${MAX_ANSWER_CHARS} characters of text in one answer.` });
    expect(texts.join("").length).toBe(MAX_ANSWER_CHARS);
    provider.script = Array.from({ length: 16 }, () => said);
    const { turn } = await call();
    expect(turn.text.length).toBe(MAX_ANSWER_CHARS);
  });

  it("fails with model_bad_response on a success without a body (204), not with model_error", async () => {
    provider.emptySuccess = 204;
    const { err } = await failure({});
    expect(err).toBeInstanceOf(RunFailure);
    expect(err).toMatchObject({ code: "model_bad_response", message: "The model sent a malformed streaming response." });
  });

  it("fails with model_bad_response naming the coding when the answer is not what its Content-Encoding says", async () => {
    provider.contentEncoding = "gzip";
    provider.script = [chunk({ content: "plain, not gzip" })];
    const { err } = await failure({});
    expect(err).toMatchObject({ code: "model_bad_response", message: "The model's answer was not what its Content-Encoding says." });
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
      provider.script = [part];
      const { err } = await failure({});
      expect(err).toBeInstanceOf(RunFailure);
      expect(err).toMatchObject({ code: "model_bad_response", message });
    }
  });

  it("reports what a call the model accepted consumed when it fails, and nothing for a call the model refused", async () => {
    provider.script = [chunk({ content: "half an answer" }), "data: {oops\n\n"];
    const usages: ModelUsage[] = [];
    expect((await failure({ onUsage: (u) => usages.push(u) })).err).toMatchObject({ code: "model_bad_response" });
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 4 }]);
    provider.refusals = [{ status: 500, headers: {} }];
    const refused: ModelUsage[] = [];
    expect((await failure({ onUsage: (u) => refused.push(u) })).err).toMatchObject({ code: "model_error" });
    expect(refused).toEqual([]);
  });

  it("takes the text parts of content sent as a list of parts, as Mistral's reasoning models send it", async () => {
    provider.script = [
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
    provider.script = [toolCall(0, "dup"), toolCall(1, "dup"), toolCall(2, undefined), toolCall(3, "call_1"), toolCall(4, "")];
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
    provider.script = [toolCall(0, undefined), toolCall(1, "call_1"), toolCall(2, "fresh")];
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
    provider.script = [chunk({ content: "abcdefghi" }), chunk({}, usage)];
    expect((await call()).usages).toEqual([expected]);
  });

  it("estimates a count the model sent as a number too large to be finite", async () => {
    // JSON.parse reads 1e400 as Infinity.
    provider.script = [chunk({ content: "abcdefghi" }), chunk({}, { prompt_tokens: 123456789, completion_tokens: 4 }).replace("123456789", "1e400")];
    expect((await call()).usages).toEqual([{ promptTokens: 2, completionTokens: 4 }]);
  });

  it("reports the model's usage, or an estimate at four characters per token when it sends none", async () => {
    provider.script = [chunk({ content: "abcdefghi" }), chunk({}, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 })];
    expect((await call()).usages).toEqual([{ promptTokens: 7, completionTokens: 3 }]);
    provider.script = [chunk({ content: "abcdefghi" })];
    // "12345678" → 2 prompt tokens; "abcdefghi" → 3 completion tokens.
    expect((await call()).usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
  });

  describe("a connection that breaks", () => {
    const finish = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`;

    it("before the answer's end fails the call with model_bad_response saying so, after forwarding what came", async () => {
      provider.script = [chunk({ content: "half an " }), chunk({ content: "answer" })];
      provider.resetAfterScript = true;
      const texts: string[] = [];
      const { err } = await failure({ onText: (t) => texts.push(t) });
      expect(err).toBeInstanceOf(RunFailure);
      expect(err).toMatchObject({ code: "model_bad_response", message: "The connection to the model broke before the answer's end." });
      expect((err as RunFailure).detail).toMatch(/^The connection broke after 2 streamed event\(s\), before the answer's end: /);
      expect(texts.join("")).toBe("half an answer");
    });

    it("after [DONE] leaves the answer whole", async () => {
      provider.script = [chunk({ content: "the whole " }), chunk({ content: "answer" }), finish, "data: [DONE]\n\n"];
      provider.resetAfterScript = true;
      const { turn } = await call();
      expect(turn.text).toBe("the whole answer");
    });

    it("inside the usage chunk that follows a finish_reason leaves the answer whole, its usage estimated", async () => {
      provider.script = [chunk({ content: "abcdefghi" }), finish, 'data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_to'];
      provider.resetAfterScript = true;
      const { turn, usages } = await call();
      expect(turn.text).toBe("abcdefghi");
      expect(usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
    });
  });
});
