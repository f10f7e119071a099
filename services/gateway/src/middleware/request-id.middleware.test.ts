import express from "express";
import request from "supertest";
import { createLogger } from "@agentrun/logger";
import { requestId } from "./request-id.middleware";

const app = express();
app.use(requestId(createLogger({ service: "test", level: "silent", pretty: false })));
app.get("/", (req, res) => {
  res.json({ id: req.id });
});

const GENERATED = /^req_[0-9a-f]{32}$/;

describe("requestId", () => {
  it.each([
    ["a plain id", "trace-123", "trace-123"],
    ["a UUID in braces", "{3f2504e0-4f89-11d3-9a0c-0305e82c3301}", "{3f2504e0-4f89-11d3-9a0c-0305e82c3301}"],
    ["spaces and slashes", "checkout/step 2 #7", "checkout/step 2 #7"],
    ["every printable ASCII character", "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~", "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"],
    ["200 characters", "x".repeat(200), "x".repeat(200)],
    ["surrounding spaces, trimmed", "   spaced id   ", "spaced id"],
  ])("echoes %s", async (_name, sent, echoed) => {
    const res = await request(app).get("/").set("X-Request-Id", sent);
    expect(res.headers["x-request-id"]).toBe(echoed);
    expect(res.body.id).toBe(echoed);
  });

  it.each([
    ["none", undefined],
    ["201 characters", "x".repeat(201)],
    ["a tab", "a\tb"],
    ["a non-ASCII character", "caf\u00e9"],
    ["only spaces", "   "],
  ])("replaces %s with a generated id", async (_name, sent) => {
    const req = request(app).get("/");
    const res = await (sent === undefined ? req : req.set("X-Request-Id", sent));
    expect(res.headers["x-request-id"]).toMatch(GENERATED);
    expect(res.body.id).toBe(res.headers["x-request-id"]);
  });
});
