import supertest from "supertest";
import { createLogger } from "@agentrun/logger";
import { createApp } from "../src/app";

describe("HTTP errors", () => {
  const app = createApp({ logger: createLogger({ service: "scripted-model", level: "silent", pretty: false }) });

  it("rejects a body without messages or model with an OpenAI-style 400", async () => {
    const res = await supertest(app).post("/v1/chat/completions").send({ messages: "nope" }).expect(400);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body.error).toEqual({ message: expect.stringMatching(/model/), type: "invalid_request_error", param: null, code: "invalid_request" });
    expect(res.body.error.message).toMatch(/messages/);
  });

  it("names the first five problems of a request and counts the rest, however many there are", async () => {
    const res = await supertest(app).post("/v1/chat/completions").send({ model: "m", messages: Array.from({ length: 50_000 }, () => 1) }).expect(400);
    expect(res.body.error.message).toMatch(/^invalid request: messages\.0: .*; messages\.4: [^;]*; … and 49995 more$/);
    expect(res.body.error.message.length).toBeLessThan(1000);
  });

  it("rejects unparseable JSON with a JSON 400, not an HTML page", async () => {
    const res = await supertest(app).post("/v1/chat/completions").set("content-type", "application/json").send("{bad").expect(400);
    expect(res.body.error.type).toBe("invalid_request_error");
  });

  it("answers unknown routes with an OpenAI-style 404", async () => {
    const res = await supertest(app).get("/v1/nothing-here").expect(404);
    expect(res.body).toEqual({ error: { message: "unknown route: GET /v1/nothing-here", type: "invalid_request_error", param: null, code: "not_found" } });
  });

  it("rejects an unknown message role", async () => {
    const res = await supertest(app).post("/v1/chat/completions").send({ model: "m", messages: [{ role: "wizard", content: "x" }] }).expect(400);
    expect(res.body.error.message).toMatch(/messages\.0\.role/);
  });

  it("refuses stream_options without stream: true, as OpenAI does, and accepts a null one", async () => {
    const refusal = { message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.", type: "invalid_request_error", param: "stream_options", code: null };
    const messages = [{ role: "user", content: "x" }];
    for (const stream of [undefined, false, null]) {
      const res = await supertest(app).post("/v1/chat/completions").send({ model: "m", messages, stream, stream_options: { include_usage: true } }).expect(400);
      expect(res.body).toEqual({ error: refusal });
    }
    // An empty object is still the parameter given.
    expect((await supertest(app).post("/v1/chat/completions").send({ model: "m", messages, stream_options: {} }).expect(400)).body.error.param).toBe("stream_options");
    const plain = await supertest(app).post("/v1/chat/completions").send({ model: "m", messages, stream: false, stream_options: null }).expect(200);
    expect(plain.body.choices[0].message.content).toBe("Echo: x");
    const streamed = await supertest(app).post("/v1/chat/completions").send({ model: "m", messages, stream: true, stream_options: { include_usage: true } }).expect(200);
    expect(streamed.text).toMatch(/"usage":\{"prompt_tokens"/);
  });

  it("answers with an error body after [sleep:MS] for [error:STATUS]", async () => {
    const start = Date.now();
    const res = await supertest(app).post("/v1/chat/completions").send({ model: "m", stream: true, messages: [{ role: "user", content: "[sleep:30][error:503]" }] }).expect(503);
    expect(Date.now() - start).toBeGreaterThanOrEqual(25);
    expect(res.body).toEqual({ error: { message: "scripted error 503", type: "server_error", param: null, code: "service_unavailable" } });
  });

  it("serves a health check and any model by id", async () => {
    expect((await supertest(app).get("/health").expect(200)).body).toEqual({ status: "ok" });
    expect((await supertest(app).get("/v1/models/gpt-x").expect(200)).body).toMatchObject({ id: "gpt-x", object: "model", owned_by: "agentrun" });
  });

  it("accepts any authorization header", async () => {
    const res = await supertest(app)
      .post("/v1/chat/completions")
      .set("authorization", "Bearer whatever")
      .send({ model: "m", messages: [{ role: "user", content: "x" }] })
      .expect(200);
    expect(res.body.choices[0].message.content).toBe("Echo: x");
  });
});
