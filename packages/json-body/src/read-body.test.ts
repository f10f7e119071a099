import { createServer, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import type { NextFunction, Request, Response } from "express";
import { readBody } from "./read-body";

/** A server whose only handler is readBody; every call of `next` is recorded. */
function serverRecordingNext(readAfterMs = 0): { server: Server; nexts: Array<unknown>; nextCalled: Promise<unknown> } {
  const nexts: unknown[] = [];
  let called!: (err: unknown) => void;
  const nextCalled = new Promise<unknown>((resolve) => (called = resolve));
  const read = readBody(1024 * 1024, () => {});
  const server = createServer((req, res) => {
    const next: NextFunction = (err?: unknown) => {
      nexts.push(err);
      called(err);
      if (!res.headersSent) res.end();
    };
    // As after the handlers before it (authentication, rate limits), which may await.
    if (readAfterMs) setTimeout(() => void read(req as Request, res as unknown as Response, next), readAfterMs);
    else void read(req as Request, res as unknown as Response, next);
  });
  return { server, nexts, nextCalled };
}

function within<T>(promise: Promise<T>, ms: number): Promise<T | "timed out"> {
  return Promise.race([promise, new Promise<"timed out">((resolve) => setTimeout(() => resolve("timed out"), ms).unref())]);
}

describe("readBody with a content coding", () => {
  let server: Server;
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it.each([
    ["gzip", 0],
    ["identity", 0],
    ["gzip", 300],
    ["identity", 300],
  ])("ends the request with an error when the client goes away mid-body (%s, read %d ms after the request came)", async (coding, readAfterMs) => {
    const setup = serverRecordingNext(readAfterMs);
    server = setup.server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const body = coding === "gzip" ? gzipSync(Buffer.from(JSON.stringify({ query: randomBytes(50_000).toString("base64") }))) : Buffer.alloc(50_000, 0x20);
    const socket = connect(port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    const codingHeader = coding === "gzip" ? "Content-Encoding: gzip\r\n" : "";
    socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${codingHeader}Content-Length: ${body.length}\r\n\r\n`);
    socket.write(body.subarray(0, 200));
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();

    const err = await within(setup.nextCalled, 3000);
    expect(err).toMatchObject({ code: "invalid_request", message: "The request body could not be read." });
    expect(setup.nexts).toHaveLength(1);
  });
});
