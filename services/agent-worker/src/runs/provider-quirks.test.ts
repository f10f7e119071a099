import type { ModelUsage } from "./model-call";
import { chunk, scriptedProvider, toolCall } from "./model-call.fixture";
import { RunFailure } from "./run-failure";

// What callModel makes of what OpenAI-compatible providers do differently from OpenAI's API.
const finishing = (finish_reason: string) => `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason }] })}\n\n`;

describe("providers' own ways", () => {
  const { provider, call, failure } = scriptedProvider();

  it("collects a thinking model's reasoning_content apart from its text, and no other reasoning field", async () => {
    provider.script = [chunk({ reasoning_content: "Let me " }), chunk({ reasoning_content: "think." }), chunk({ content: "A" }), toolCall(0, "call_1"), finishing("tool_calls")];
    const { turn, texts } = await call();
    expect(texts).toEqual(["A"]);
    expect(turn.reasoning).toBe("Let me think.");
    expect(turn.toolCalls).toHaveLength(1);
    // Groq's and OpenRouter's `reasoning`: some of them refuse it back.
    provider.script = [chunk({ reasoning: "Hmm." }), chunk({ content: "B" })];
    const other = await call();
    expect([other.turn.reasoning, other.texts]).toEqual([undefined, ["B"]]);
    provider.script = [chunk({ content: "C" })];
    expect((await call()).turn.reasoning).toBeUndefined();
  });

  it("fails with model_error an answer ended by finish_reason error, insufficient_system_resource or abort (vLLM, SGLang), reporting what it consumed", async () => {
    for (const reason of ["error", "insufficient_system_resource", "abort"]) {
      provider.script = [chunk({ content: "Half an ans" }), finishing(reason)];
      const usages: ModelUsage[] = [];
      const { err } = await failure({ onUsage: (u) => usages.push(u) });
      expect(err).toBeInstanceOf(RunFailure);
      expect(err).toMatchObject({ code: "model_error", message: "The model ended its answer with an error.", detail: `finish_reason: ${reason}` });
      expect(usages).toHaveLength(1);
    }
  });

  it("takes Mistral's model_length as an answer cut at the model's limit", async () => {
    provider.script = [chunk({ content: "Cut" }), finishing("model_length")];
    expect((await call()).turn).toMatchObject({ text: "Cut", cutShort: "length" });
  });
});

describe("a server that refuses stream_options", () => {
  // A provider of its own: the client remembers the refusal.
  const { provider, call, failure } = scriptedProvider();

  it("is asked again at once without it, and from then on never sent it", async () => {
    provider.refusals = [{ status: 422, headers: {}, body: JSON.stringify({ error: { message: "body.stream_options: Extra inputs are not permitted", type: "invalid_request_message_error" } }) }];
    provider.script = [chunk({ content: "ok" })];
    const first = await call({ maxRetries: 0 });
    expect(first.turn.text).toBe("ok");
    // Its usage is estimated: none was asked for.
    expect(first.usages).toEqual([{ promptTokens: 2, completionTokens: 1 }]);
    expect(provider.bodies.map((b) => "stream_options" in b)).toEqual([true, false]);
    provider.script = [chunk({ content: "again" })];
    await call();
    expect(provider.bodies.map((b) => "stream_options" in b)).toEqual([true, false, false]);
  });

  it("is not taken for a refusal that does not name the field, nor for one that only echoes the request", async () => {
    const echo = JSON.stringify({ detail: [{ type: "missing", loc: ["body", "prompt"], msg: "Field required", input: { model: "m", stream: true, stream_options: { include_usage: true } } }] });
    for (const body of [JSON.stringify({ error: { message: "unknown model", type: "invalid_request_error" } }), JSON.stringify({ error: { message: echo } })]) {
      provider.refusals = [{ status: 422, headers: {}, body }];
      provider.requests = 0;
      const { err } = await failure({ model: "other" });
      expect(err).toMatchObject({ code: "model_error" });
      expect(provider.requests).toBe(1);
    }
  });

  it("takes a validation error located at the field (Mistral's, given whole by the worker's fetch), for that model only", async () => {
    const mistral = JSON.stringify({ object: "error", message: { detail: [{ type: "extra_forbidden", loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" }] }, type: "invalid_request_message_error" });
    provider.refusals = [{ status: 422, headers: {}, body: JSON.stringify({ error: { message: mistral } }) }];
    provider.script = [chunk({ content: "ok" })];
    expect((await call({ model: "mistral-small" })).turn.text).toBe("ok");
    await call({ model: "another-model" });
    expect(provider.bodies.map((b) => [b.model, "stream_options" in b])).toEqual([["mistral-small", true], ["mistral-small", false], ["another-model", true]]);
  });

  it("takes OpenAI's refusal, streamed in `refusal` deltas with no content, as the answer's text", async () => {
    provider.script = [chunk({ role: "assistant", content: null, refusal: "" }), chunk({ content: null, refusal: "I'm sorry, " }), chunk({ content: null, refusal: "I can't help with that." }), finishing("stop")];
    const { turn, texts } = await call();
    expect([turn.text, texts]).toEqual(["I'm sorry, I can't help with that.", ["I'm sorry, ", "I can't help with that."]]);
  });
});
