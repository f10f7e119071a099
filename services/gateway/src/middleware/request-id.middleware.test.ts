import express from "express";
import request from "supertest";
import { createLogger } from "@agentrun/logger";
import { capturedLogger, eventually } from "@agentrun/testing";
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

describe("requestId: req.log", () => {
  /** An app whose logger writes JSON lines into `lines`, at `level`. */
  function loggedApp(level: "info" | "warn") {
    const { logger, lines } = capturedLogger(level);
    const logged = express();
    logged.use(requestId(logger));
    logged.get("/warn", (req, res) => {
      req.log.warn({ step: 1 }, "first");
      req.log.warn({ step: 2 }, "second");
      res.json({ same: req.log === req.log });
    });
    logged.get("/quiet", (_req, res) => {
      res.json({});
    });
    logged.get("/replaced", (req, res) => {
      req.log = req.log.child({ runId: "run_1" });
      req.log.warn("replaced");
      res.json({});
    });
    return { app: logged, lines };
  }

  it("carries the request id, one logger per request", async () => {
    const { app: logged, lines } = loggedApp("warn");
    const a = await request(logged).get("/warn").set("X-Request-Id", "trace-a");
    await request(logged).get("/warn").set("X-Request-Id", "trace-b");
    expect(a.body).toEqual({ same: true });
    expect(lines.map((l) => [l.requestId, l.msg, l.step])).toEqual([
      ["trace-a", "first", 1],
      ["trace-a", "second", 2],
      ["trace-b", "first", 1],
      ["trace-b", "second", 2],
    ]);
  });

  it("writes one request line per request when the level takes info lines, none otherwise", async () => {
    const info = loggedApp("info");
    await request(info.app).get("/quiet").set("X-Request-Id", "trace-q");
    await eventually(async () => info.lines.length > 0, { timeoutMs: 2_000, intervalMs: 10 });
    expect(info.lines).toEqual([expect.objectContaining({ requestId: "trace-q", msg: "request", method: "GET", path: "/quiet", status: 200 })]);

    const warn = loggedApp("warn");
    await request(warn.app).get("/quiet").set("X-Request-Id", "trace-q");
    await request(warn.app).get("/warn").set("X-Request-Id", "trace-w");
    expect(warn.lines.map((l) => l.msg)).toEqual(["first", "second"]);
  });

  it("can be replaced by a route", async () => {
    const { app: logged, lines } = loggedApp("warn");
    await request(logged).get("/replaced").set("X-Request-Id", "trace-r");
    expect(lines).toEqual([expect.objectContaining({ requestId: "trace-r", runId: "run_1", msg: "replaced" })]);
  });
});
