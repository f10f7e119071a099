import OpenAI from "openai";
import { finalFailureOf, modelFailure } from "./run-failure";

describe("finalFailureOf", () => {
  it("is worker_lost for a job BullMQ failed because its lock lapsed too often", () => {
    expect(finalFailureOf(new Error("job stalled more than allowable limit"))).toMatchObject({ code: "worker_lost" });
  });

  it("is internal_error for a job that failed on every attempt", () => {
    expect(finalFailureOf(new Error("Connection is closed."))).toMatchObject({ code: "internal_error" });
  });
});

describe("modelFailure", () => {
  const SECRET = "Incorrect API key provided: Bearer sk-live-0123456789abcdef. You can find your key at https://example.com/keys.";
  // As the SDK builds them from a provider's answer: the body's `error` object and the headers.
  const answered = (status: number, error: object) => OpenAI.APIError.generate(status, { error }, undefined, new Headers());

  it.each([
    [401, { message: SECRET, type: "invalid_request_error", code: "invalid_api_key" }, "model_error", "The model answered 401 (invalid_api_key)."],
    [400, { message: SECRET, code: "context_length_exceeded" }, "model_error", "The model answered 400 (context_length_exceeded)."],
    [500, { message: SECRET }, "model_error", "The model answered 500."],
    [502, { message: SECRET, code: 502 }, "model_error", "The model answered 502 (502)."],
    [429, { message: SECRET, code: "rate_limit_exceeded" }, "model_rate_limited", "The model answered 429 (rate_limit_exceeded): the request was rate limited."],
    [429, { message: SECRET }, "model_rate_limited", "The model answered 429: the request was rate limited."],
  ])("gives a fixed message for a %i, with the provider's code when it is an identifier", (status, error, code, message) => {
    const failure = modelFailure(answered(status, error), 1000);
    expect({ code: failure.code, message: failure.message }).toEqual({ code, message });
    // The provider's text is kept for the worker's log.
    expect(failure.detail).toContain(SECRET);
  });

  it.each([
    ["free text", "Bearer sk-live-0123456789abcdef is not valid"],
    ["too long an identifier", "x".repeat(65)],
    ["an object", { key: "sk-live-0123456789abcdef" }],
    ["a fraction", 1.5],
  ])("leaves out a provider code that is %s", (_name, providerCode) => {
    const failure = modelFailure(answered(401, { message: SECRET, code: providerCode }), 1000);
    expect(failure.message).toBe("The model answered 401.");
  });

  it("gives a fixed message for an error sent inside the streamed answer", () => {
    const streamed = new OpenAI.APIError(undefined, { message: `${SECRET} (bad JSON)`, code: "server_error" }, undefined, new Headers());
    const failure = modelFailure(streamed, 1000);
    expect({ code: failure.code, message: failure.message }).toEqual({ code: "model_error", message: "The model reported an error while answering (server_error)." });
    expect(failure.detail).toContain(SECRET);
  });

  it("gives a fixed message for any other error, keeping its text for the log", () => {
    const failure = modelFailure(new TypeError(`cannot read ${SECRET}`), 1000);
    expect({ code: failure.code, message: failure.message }).toEqual({ code: "model_error", message: "The model call failed." });
    expect(failure.detail).toContain(SECRET);
  });

  it("keeps the codes of unreachable models and malformed answers, with fixed messages", () => {
    const unreachable = modelFailure(new OpenAI.APIConnectionError({ cause: new Error(`connect ECONNREFUSED ${SECRET}`) }), 1000);
    expect({ code: unreachable.code, message: unreachable.message }).toEqual({ code: "model_error", message: "The model could not be reached." });
    expect(unreachable.detail).toContain("ECONNREFUSED");
    const malformed = modelFailure(new SyntaxError(`Unexpected token in JSON: ${SECRET}`), 1000);
    expect({ code: malformed.code, message: malformed.message }).toEqual({ code: "model_bad_response", message: "The model sent a malformed streaming response." });
  });
});
