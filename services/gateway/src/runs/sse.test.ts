import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import express, { type Response } from "express";
import type { RunEvent } from "@agentrun/contracts";
import { endAllStreams, openSse, type SseStream } from "./sse";
import { beginStopping } from "../shutdown";

// A real HTTP server whose one route opens a stream and hands it, with its response, to the test.
const STALL_MS = 300;
const CONTENT = 64 * 1024;
let server: http.Server;
let port: number;
let opened: (s: { stream: SseStream; res: Response }) => void;
/** Of the route whose streams defer their headers (a stream of an earlier test may still reach `opened`). */
let openedDeferred: (s: { stream: SseStream; res: Response }) => void;

beforeAll(async () => {
  const app = express();
  app.get("/stream", (req, res) => opened({ stream: openSse(req, res, 60_000, { stalledClientTimeoutMs: STALL_MS }), res }));
  app.get("/deferred", (req, res) => openedDeferred({ stream: openSse(req, res, 50, { deferHeaders: true }), res }));
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
});

const nextStream = () => new Promise<{ stream: SseStream; res: Response }>((resolve) => (opened = resolve));
const chunk = (seq: number): RunEvent => ({ seq, type: "text_chunk", run_id: "run_x", content: "x".repeat(CONTENT) }) as RunEvent;
const completed = (seq: number): RunEvent => ({ seq, type: "run_completed", run_id: "run_x", credits_used: 1, duration_ms: 1 }) as RunEvent;
/** What the response may hold unsent: its high-water mark and the one event that crossed it. */
const bound = (res: Response) => res.writableHighWaterMark + CONTENT + 1024;
/** Opens the stream as a reading client; resolves with everything it received once it ends. */
const readStream = () =>
  new Promise<string>((resolve, reject) => {
    http.get({ port, host: "127.0.0.1", path: "/stream" }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve(text));
    }).on("error", reject);
  });
const seqsIn = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

// First: the streams' shutdown, which later tests begin, ends every stream opened after it.
it("sends no ping before deferred headers, so that the caller may still answer with an error; pings after them", async () => {
  const next = new Promise<{ stream: SseStream; res: Response }>((resolve) => (openedDeferred = resolve));
  const received: string[] = [];
  const request = http.get({ port, host: "127.0.0.1", path: "/deferred" }, (res) => {
    res.setEncoding("utf8");
    res.on("data", (c: string) => received.push(c));
  });
  request.on("error", () => {});
  const { stream, res } = await next;
  try {
    // Six heartbeat intervals of a slow first read of the stores.
    await new Promise((r) => setTimeout(r, 300));
    expect(res.headersSent).toBe(false);
    stream.ready();
    await new Promise((r) => setTimeout(r, 300));
    expect(res.headersSent).toBe(true);
    expect(received.join("")).toMatch(/^(: ping\n\n)+$/);
  } finally {
    stream.end();
    request.destroy();
  }
});

it("holds no more than the high-water mark for a client that stops reading, and disconnects it", async () => {
  const next = nextStream();
  const socket = net.connect(port, "127.0.0.1");
  socket.pause();
  socket.write(`GET /stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n\r\n`);
  const { stream, res } = await next;
  try {
    // A long replay sent at once, then live events every few milliseconds.
    for (let seq = 1; seq <= 200; seq++) stream.send(chunk(seq));
    let seq = 200;
    let mostUnsent = 0;
    const started = Date.now();
    while (!stream.signal.aborted && Date.now() - started < 5000) {
      stream.send(chunk(++seq));
      mostUnsent = Math.max(mostUnsent, res.writableLength);
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(mostUnsent).toBeLessThanOrEqual(bound(res));
    expect(stream.signal.aborted).toBe(true);
    expect(Date.now() - started).toBeLessThan(STALL_MS + 1000);
    expect(res.destroyed).toBe(true);
    // Released like a stream whose client went away.
    expect(endAllStreams()).toBe(0);
  } finally {
    socket.destroy();
  }
});

it("gives a reader every event of a long burst, in order, ending after the last", async () => {
  const next = nextStream();
  const got = readStream();
  const { stream, res } = await next;
  const events = [...Array.from({ length: 300 }, (_, i) => chunk(i + 1)), completed(301)];
  for (const e of events) stream.send(e);
  expect(res.writableLength).toBeLessThanOrEqual(bound(res));
  expect(seqsIn(await got)).toEqual(events.map((e) => e.seq));
});

it("writes what is waiting before an end the caller asks for", async () => {
  const next = nextStream();
  const got = readStream();
  const { stream } = await next;
  for (let seq = 1; seq <= 50; seq++) stream.send(chunk(seq));
  // As on shutdown: no terminal event; what was sent still arrives, and the response ends.
  expect(endAllStreams()).toBe(1);
  stream.send(chunk(51));
  expect(seqsIn(await got)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
});

it("ends a stream opened once shutdown has begun, after what its opener sent at once", async () => {
  beginStopping();
  endAllStreams();
  const next = nextStream();
  const got = readStream();
  const { stream } = await next;
  stream.send(chunk(1));
  expect(seqsIn(await got)).toEqual([1]);
  expect(endAllStreams()).toBe(0);
});
