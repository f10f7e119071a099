import OpenAI from "openai";
import { completionChunks, type StreamedResponse } from "./completion-chunks";

const chunk = (content: string, extra: object = {}) => ({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content } }], ...extra });
const event = (value: unknown) => `data: ${typeof value === "string" ? value : JSON.stringify(value)}\n\n`;

/** A body that yields `parts` as separate reads. */
function response(parts: (string | Uint8Array)[]): StreamedResponse {
  return {
    headers: new Headers({ "x-request-id": "req_1" }),
    body: (async function* () {
      for (const p of parts) yield p;
    })(),
  };
}

/** Every read's chunks, as the consumer sees them; `empty`: with the reads that completed no event. */
async function reads(parts: (string | Uint8Array)[], maxEventChars?: number, empty = false) {
  const out: string[][] = [];
  for await (const chunks of completionChunks(response(parts), maxEventChars)) if (empty || chunks.length > 0) out.push(chunks.map((c) => c.choices[0]?.delta.content ?? ""));
  return out;
}

/** Reads a stream of chunks to its end (or its error). */
async function drain(chunks: AsyncGenerator<unknown>): Promise<void> {
  for await (const _ of chunks);
}

describe("completionChunks", () => {
  it("gives the chunks of one read together, and those of the next read apart", async () => {
    expect(await reads([event(chunk("a")) + event(chunk("b")), event(chunk("c")), event("[DONE]")])).toEqual([["a", "b"], ["c"]]);
  });

  it("skips an event without data (a keep-alive `data:` line), as the SDK does", async () => {
    expect(await reads([event(chunk("a")), "data: \n\n", "data:\n\n", event(chunk("b", { choices: [{ index: 0, delta: { content: "b" }, finish_reason: "stop" }] })), event("[DONE]")])).toEqual([["a"], ["b"]]);
  });

  it("skips a named event without data (`event: message` or `event: ping` with an empty `data:`), as an EventSource does", async () => {
    const stop = event(chunk("b", { choices: [{ index: 0, delta: { content: "b" }, finish_reason: "stop" }] }));
    expect(await reads([event(chunk("a")), "event: message\ndata:\n\n", "event: ping\r\ndata: \r\n\r\n", stop, event("[DONE]")])).toEqual([["a"], ["b"]]);
    // One named error still fails the answer, data or none.
    await expect(reads([event(chunk("a")), "event: error\ndata:\n\n"])).rejects.toBeInstanceOf(OpenAI.APIError);
  });

  it("keeps an answer whole when an error is reported after its finish_reason, as when the connection breaks there", async () => {
    const stop = event(chunk("done", { choices: [{ index: 0, delta: { content: "done" }, finish_reason: "stop" }] }));
    for (const late of [event({ error: { message: "late", code: "server_error" } }), "event: error\ndata: late\n\n", 'error: {"message":"late"}\n\n']) {
      expect(await reads([event(chunk("all ")), stop, late, event("[DONE]")])).toEqual([["all "], ["done"]]);
    }
    // Before the finish_reason, the same error fails the answer.
    await expect(reads([event(chunk("all ")), event({ error: { message: "early" } }), stop])).rejects.toBeInstanceOf(OpenAI.APIError);
  });

  it("assembles an event split across reads, also inside a multi-byte character", async () => {
    const bytes = new TextEncoder().encode(event(chunk("héllo 🦊")));
    const cut = bytes.indexOf(0xf0) + 2; // inside the fox's four bytes
    expect(await reads([bytes.slice(0, 10), bytes.slice(10, cut), bytes.slice(cut), event("[DONE]")])).toEqual([["héllo 🦊"]]);
  });

  it("gives a read that completed no event (a keep-alive comment, part of an event) as an empty array", async () => {
    const whole = event(chunk("x"));
    expect(await reads([": keep-alive\n\n", whole.slice(0, 9), whole.slice(9), event("[DONE]")], undefined, true)).toEqual([[], [], ["x"]]);
  });

  it("reads CRLF framing and skips comments and events without data", async () => {
    expect(await reads([`: keep-alive\r\n\r\ndata: ${JSON.stringify(chunk("x"))}\r\n\r\nevent: ping\n\n`, "data: [DONE]\r\n\r\n"])).toEqual([["x"]]);
  });

  it("ignores what follows [DONE] but reads the body to its end", async () => {
    let finished = false;
    const body = (async function* () {
      yield event(chunk("a")) + event("[DONE]");
      yield event(chunk("late"));
      finished = true;
    })();
    const seen: string[] = [];
    for await (const chunks of completionChunks({ headers: new Headers(), body })) seen.push(...chunks.map((c) => c.choices[0]!.delta.content!));
    expect(seen).toEqual(["a"]);
    expect(finished).toBe(true);
  });

  it("throws the SDK's APIError for a chunk carrying an error, with the provider's message", async () => {
    const err = await reads([event(chunk("a")), event({ error: { message: "overloaded", type: "server_error" } })]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain("overloaded");
  });

  it("throws the SDK's APIError for llama.cpp's `error:` line and for an event named error, after the chunks before it", async () => {
    const llama = 'error: {"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}\n\n';
    for (const failing of [llama, `event: error\ndata: ${JSON.stringify({ message: "engine overloaded" })}\n\n`, `event: error\ndata: ${JSON.stringify({ error: "engine overloaded" })}\n\n`, "event: error\ndata: engine overloaded\n\n"]) {
      const out: string[] = [];
      const err = await (async () => {
        for await (const chunks of completionChunks(response([event(chunk("a")), failing]))) out.push(...chunks.map((c) => c.choices[0]!.delta.content!));
      })().catch((e: unknown) => e);
      expect(out).toEqual(["a"]);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as Error).message).toMatch(failing === llama ? /exceeds the available context size/ : /engine overloaded/);
    }
  });

  it("tells each finish_reason, and that the answer goes on when more of it follows one", async () => {
    const told: string[] = [];
    const parts = [event(chunk("a", { choices: [{ index: 0, delta: { content: "a" }, finish_reason: "stop" }] })), event(chunk("b")), event(chunk("", { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })), event("[DONE]")];
    const seen: string[] = [];
    for await (const chunks of completionChunks(response(parts), undefined, (how) => told.push(how), () => told.push("resumed"))) seen.push(...chunks.map((c) => c.choices[0]!.delta.content ?? ""));
    expect(seen).toEqual(["a", "b", ""]);
    // The first finish_reason came with a piece of the answer (more may come), the second without.
    expect(told).toEqual(["finish-with-answer", "resumed", "finish", "done"]);
  });

  it("throws SyntaxError after the chunks read when the body ends before [DONE] or a finish_reason", async () => {
    const out: string[] = [];
    const err = await (async () => {
      for await (const chunks of completionChunks(response([event(chunk("half an")), event(chunk(" answer"))]))) out.push(...chunks.map((c) => c.choices[0]!.delta.content!));
    })().catch((e: unknown) => e);
    expect(out).toEqual(["half an", " answer"]);
    expect(err).toBeInstanceOf(SyntaxError);
    expect((err as Error).message).toBe("The streamed answer ended before its end ([DONE] or a finish_reason).");
  });

  it("reads a last event that the body ends without its closing blank line", async () => {
    expect(await reads([event(chunk("a")), "data: [DONE]"])).toEqual([["a"]]);
    expect(await reads([event(chunk("a")), `${event(chunk("b"))}data: [DONE]\n`])).toEqual([["a"], ["b"]]);
  });

  it("takes an answer that had its finish_reason though the body ends inside a last event (a usage chunk cut short)", async () => {
    const last = { ...chunk(""), choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
    expect(await reads([event(chunk("a")), event(last), 'data: {"id":"c1","usage":{"prompt_'])).toEqual([["a"], [""]]);
  });

  it("reads the usage chunk after a finish_reason that the body ends without its closing blank line", async () => {
    const last = { ...chunk(""), choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
    const out: unknown[] = [];
    for await (const chunks of completionChunks(response([event(chunk("a")), event(last), 'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500}}']))) out.push(...chunks);
    expect(out.at(-1)).toMatchObject({ usage: { prompt_tokens: 1000, completion_tokens: 500 } });
  });

  it("reports an answer cut inside an event as cut short, not as a model's bad JSON", async () => {
    const err = await reads([event(chunk("a")), 'data: {"id":"c1","choices":[{"delta":{"content":"b']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SyntaxError);
    expect((err as Error).message).toBe("The streamed answer ended before its end ([DONE] or a finish_reason).");
  });

  it("takes a finish_reason without [DONE] as the answer's end", async () => {
    const last = { ...chunk(""), choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
    expect(await reads([event(chunk("a")), event(last)])).toEqual([["a"], [""]]);
  });

  it("throws SyntaxError for a body that is not an event stream, naming its content type, and for an empty stream", async () => {
    const completion = { id: "c1", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "The full answer" }, finish_reason: "stop" }] };
    const json = completionChunks({ headers: new Headers({ "content-type": "application/json" }), body: (async function* () { yield JSON.stringify(completion); })() });
    await expect(drain(json)).rejects.toThrow(new SyntaxError("The model answered application/json instead of an event stream."));
    const empty = completionChunks({ headers: new Headers({ "content-type": "text/event-stream" }), body: (async function* () { yield ": nothing\n\n"; })() });
    await expect(drain(empty)).rejects.toThrow(new SyntaxError("The streamed answer held no chunk."));
  });

  it("throws SyntaxError for a chunk that is not a JSON object", async () => {
    for (const data of ["null", "42", '"text"', "[1]"]) {
      await expect(reads([event(data), event("[DONE]")])).rejects.toThrow(new SyntaxError("A streamed chunk is not a JSON object."));
    }
  });

  it("throws SyntaxError for a chunk whose JSON does not parse", async () => {
    await expect(reads([event(chunk("a")), 'data: {"id":"c1","choices":[{"delta":\n\n'])).rejects.toBeInstanceOf(SyntaxError);
  });

  it("gives the chunks before a bad one in the same read, then throws", async () => {
    for (const bad of ['data: {"id":"c1","choices":[{"delta":\n\n', event({ error: { message: "overloaded" } })]) {
      const seen: string[][] = [];
      const body = response([event(chunk("a")), event(chunk("b")) + event(chunk("c")) + bad + event(chunk("never"))]);
      const err = await (async () => {
        for await (const chunks of completionChunks(body)) seen.push(chunks.map((c) => c.choices[0]!.delta.content!));
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(seen).toEqual([["a"], ["b", "c"]]);
    }
  });

  it("throws SyntaxError when one event outgrows the bound instead of buffering it", async () => {
    const endless = ["data: ", "x".repeat(600), "x".repeat(600)];
    await expect(reads(endless, 1000)).rejects.toThrow(/exceeded 1000 characters/);
    expect(await reads([event(chunk("y".repeat(500))), event("[DONE]")], 1000)).toEqual([["y".repeat(500)]]);
  });

  it("refuses a response without a body", async () => {
    await expect(completionChunks({ headers: new Headers(), body: null }).next()).rejects.toThrow(new SyntaxError("The model answered without a body instead of an event stream."));
  });
});
