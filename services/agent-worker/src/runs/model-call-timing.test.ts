import type { ModelUsage } from "./model-call";
import { chunk, scriptedProvider } from "./model-call.fixture";
import { RunFailure } from "./run-failure";

// callModel against the clock: a call cancelled at each stage and what it reports, the call's
// timeouts, and the retries a provider asks for within them.
/** A chunk that ends the answer. */
const FINISH = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`;
/** A chunk with a piece of the answer and a finish_reason, as a proxy that marks every chunk finished sends it. */
const finished = (content: string) => `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: "stop" }] })}\n\n`;

describe("callModel in time", () => {
  const { provider, call, failure } = scriptedProvider();

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
    provider.script = [chunk({ content: "late" })];
    provider.gapMs = 2000;
    const { err, usages } = await cancelledAfter(200);
    expect(err).toMatchObject({ code: "cancel" });
    // "12345678" → 2 prompt tokens; nothing streamed yet.
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 0 }]);
  });

  it("reports what was streamed for a call cancelled while the model was answering", async () => {
    provider.script = [chunk({ content: "abcdefghi" }), chunk({ content: "late" })];
    provider.gapMs = 300;
    const { usages } = await cancelledAfter(450);
    expect(usages).toEqual([{ promptTokens: 2, completionTokens: 3 }]);
  });

  it("reports nothing for a call cancelled before the model accepted it (no response headers yet)", async () => {
    provider.script = [chunk({ content: "late" })];
    provider.headersAfterMs = 2000;
    const { err, usages } = await cancelledAfter(200);
    expect(err).toMatchObject({ code: "cancel" });
    expect(usages).toEqual([]);
  });

  it("takes keep-alive comments as the model at work: no idle timeout while they come", async () => {
    // A provider that keeps the connection alive with SSE comments while its model is slow.
    provider.script = [": PROCESSING\n\n", ": PROCESSING\n\n", ": PROCESSING\n\n", ": PROCESSING\n\n", chunk({ content: "at last" })];
    provider.gapMs = 150;
    const { turn } = await call({ timeoutMs: 5000, idleTimeoutMs: 400 });
    expect(turn.text).toBe("at last");
  });

  it("ends a call still streaming at timeoutMs with model_timeout, though chunks keep arriving within the idle timeout", async () => {
    provider.script = Array.from({ length: 12 }, (_, i) => chunk({ content: `part ${i} ` }));
    provider.gapMs = 150;
    const { err, ms } = await failure({ timeoutMs: 600, idleTimeoutMs: 1000 });
    expect(err).toBeInstanceOf(RunFailure);
    expect(err).toMatchObject({ code: "model_timeout", message: "The model call took longer than 600 ms." });
    expect(ms).toBeGreaterThanOrEqual(550);
    // Before the stream would have ended by itself (12 × 150 ms).
    expect(ms).toBeLessThan(12 * 150);
  });

  it("fails at once with the model's refusal when the wait it asks for is longer than the call has left", async () => {
    provider.refusals = [{ status: 503, headers: { "retry-after-ms": "10000" } }];
    provider.script = [chunk({ content: "late" })];
    const { err, ms } = await failure({ timeoutMs: 2000, maxRetries: 1 });
    expect(err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    expect(ms).toBeLessThan(1000);
    expect(provider.requests).toBe(1);
    // A 429 asking for 40 s: rate limited, as the model said, not a timeout after waiting.
    provider.refusals = [{ status: 429, headers: { "retry-after": "40" } }];
    const limited = await failure({ timeoutMs: 30_000, idleTimeoutMs: 300, maxRetries: 2 });
    expect(limited.err).toMatchObject({ code: "model_rate_limited", message: "The model answered 429: the request was rate limited." });
    expect(limited.ms).toBeLessThan(1000);
  });

  it("waits as long as the model asks before a retry, with no idle timeout during the wait", async () => {
    provider.refusals = [
      { status: 429, headers: { "retry-after-ms": "400" } },
      { status: 503, headers: { "retry-after": "0.3" } },
    ];
    provider.script = [chunk({ content: "third time" })];
    const t0 = Date.now();
    const { turn } = await call({ timeoutMs: 5000, idleTimeoutMs: 250, maxRetries: 2 });
    expect(turn.text).toBe("third time");
    expect(provider.requests).toBe(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650);
  });

  it("counts the retries' waits in timeoutMs: no fresh budget per attempt", async () => {
    provider.refusals = Array.from({ length: 5 }, () => ({ status: 503, headers: { "retry-after-ms": "150" } }));
    provider.script = [chunk({ content: "late" })];
    const { err, ms } = await failure({ timeoutMs: 400, maxRetries: 5 });
    expect(err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    // Two waits of 150 ms fit in 400 ms; the third would not.
    expect(provider.requests).toBe(3);
    expect(ms).toBeLessThan(400);
  });

  it("does not retry what the model says not to, nor a refusal that a retry cannot change", async () => {
    provider.refusals = [{ status: 503, headers: { "x-should-retry": "false" } }];
    expect((await failure({ maxRetries: 2 })).err).toMatchObject({ code: "model_error", message: "The model answered 503." });
    expect(provider.requests).toBe(1);
    provider.refusals = [{ status: 400, headers: {} }];
    expect((await failure({ maxRetries: 2 })).err).toMatchObject({ code: "model_error", message: "The model answered 400." });
    expect(provider.requests).toBe(2);
  });

  it("takes an answer whose response stays open after [DONE]: no timeout, the rest cut off", async () => {
    provider.script = [chunk({ content: "Hello" }), FINISH, chunk({}, { prompt_tokens: 7, completion_tokens: 3 })];
    provider.holdOpen = { done: true };
    const t0 = Date.now();
    const { turn, texts, usages } = await call({ idleTimeoutMs: 1500, timeoutMs: 5000 });
    expect([turn.text, texts, usages]).toEqual(["Hello", ["Hello"], [{ promptTokens: 7, completionTokens: 3 }]]);
    expect(Date.now() - t0).toBeLessThan(1500);
  });

  it("takes an answer ended by its finish_reason whose response then only sends keep-alive comments, within moments", async () => {
    provider.script = [chunk({ content: "Hi" }), FINISH, chunk({}, { prompt_tokens: 5, completion_tokens: 1 })];
    provider.holdOpen = { done: false, keepAliveMs: 100 };
    const t0 = Date.now();
    const { turn, usages } = await call({ idleTimeoutMs: 1000, timeoutMs: 30_000 });
    expect([turn.text, usages]).toEqual(["Hi", [{ promptTokens: 5, completionTokens: 1 }]]);
    // Cut off 2 s after the finish_reason, not at timeoutMs (the comments keep the call from idling).
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it.each([
    ["on every chunk", true],
    ["on an early chunk only", false],
  ])("takes the whole answer of a proxy that puts a finish_reason %s, not what came within the drain", async (_how, everyChunk) => {
    const part = (content: string) => (everyChunk ? finished(content) : chunk({ content }));
    provider.script = [finished("Thinking done. "), part("The answer "), part("is "), part("42."), FINISH];
    // 5 s in all, 1.3 s apart: each pause within DRAIN_AFTER_FINISH_MS (2 s), the answer past it.
    provider.gapMs = 1300;
    const { turn } = await call({ idleTimeoutMs: 5000, timeoutMs: 30_000 });
    expect(turn.text).toBe("Thinking done. The answer is 42.");
  });

  it("takes the whole answer of a proxy that puts a finish_reason on every chunk through pauses longer than the drain, within the idle timeout", async () => {
    provider.script = [finished("The answer "), finished("is 42."), FINISH];
    // Past DRAIN_AFTER_FINISH_MS (2 s) between the pieces, as a model thinking mid-answer.
    provider.gapMs = 2600;
    const { turn } = await call({ idleTimeoutMs: 5000, timeoutMs: 30_000 });
    expect(turn.text).toBe("The answer is 42.");
  });

  it("still times out a response held open before its answer's end", async () => {
    provider.script = [chunk({ content: "Hel" })];
    provider.holdOpen = { done: false, keepAliveMs: 100 };
    const { err, ms } = await failure({ idleTimeoutMs: 300, timeoutMs: 1500 });
    expect(err).toMatchObject({ code: "model_timeout", message: "The model call took longer than 1500 ms." });
    expect(ms).toBeLessThan(3000);
  });

  /** Holds the event loop for `ms`, as a process that is paused (SIGSTOP, a frozen VM) or busy. */
  const stall = (ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end);
  };

  it.each([
    ["before its first chunk was read", 0],
    ["mid-answer", 1],
  ])("takes the answer that came while the process itself stalled past the idle timeout, %s", async (_when, stalledAt) => {
    provider.script = [chunk({ content: "The answer " }), chunk({ content: "is " }), chunk({ content: "42." }), FINISH];
    provider.gapMs = 50;
    // The part waits in the socket, unread, while the process stalls: once it runs again, Node
    // fires the expired idle timer before it reads the socket.
    provider.afterPart = (index) => void (index === stalledAt && stall(800));
    const { turn, texts } = await call({ idleTimeoutMs: 300, timeoutMs: 5000 });
    expect(turn.text).toBe("The answer is 42.");
    expect(texts).toEqual(["The answer ", "is ", "42."]);
  });

  it.each([
    ["", false],
    [" after the process stalled", true],
  ])("still fails a model that sends nothing within the idle timeout%s", async (_how, stalled) => {
    provider.script = [chunk({ content: "Hel" })];
    provider.holdOpen = { done: false };
    if (stalled) provider.afterPart = () => stall(800);
    const { err, ms } = await failure({ idleTimeoutMs: 300, timeoutMs: 5000 });
    expect(err).toMatchObject({ code: "model_timeout", message: "The model sent nothing for 300 ms." });
    // Counted from "Hel", read once the process ran again.
    const from = stalled ? 800 : 0;
    expect(ms).toBeGreaterThanOrEqual(from + 290);
    expect(ms).toBeLessThan(from + 800);
  });

  it("asks again when the connection broke after the model accepted the request and before any event, and answers", async () => {
    provider.breakBeforeAnswer = 1;
    provider.script = [chunk({ content: "asked again" })];
    const { turn, usages } = await call({ timeoutMs: 5000, maxRetries: 1 });
    expect(turn.text).toBe("asked again");
    expect(provider.requests).toBe(2);
    // The broken attempt's estimate (the prompt, 8 characters), then the answer's.
    expect(usages).toEqual([
      { promptTokens: 2, completionTokens: 0 },
      { promptTokens: 2, completionTokens: 3 },
    ]);
  });

  it("fails as before once such breaks pass maxRetries, and never asks again when the answer had begun", async () => {
    provider.breakBeforeAnswer = 3;
    const broken = await failure({ timeoutMs: 10_000, maxRetries: 2 });
    expect(broken.err).toMatchObject({ code: "model_bad_response", message: "The connection to the model broke before the answer's end." });
    expect(provider.requests).toBe(3);

    Object.assign(provider, { requests: 0, breakBeforeAnswer: 0, script: [chunk({ content: "half" })], resetAfterScript: true });
    const begun = await failure({ timeoutMs: 10_000, maxRetries: 2 });
    expect(begun.err).toMatchObject({ code: "model_bad_response" });
    expect(provider.requests).toBe(1);
  });

  it("retries within timeoutMs and answers", async () => {
    provider.refusals = [{ status: 503, headers: { "retry-after-ms": "100" } }];
    provider.script = [chunk({ content: "second time" })];
    const { turn } = await call({ timeoutMs: 2000, maxRetries: 1 });
    expect(turn.text).toBe("second time");
    expect(provider.requests).toBe(2);
  });
});
