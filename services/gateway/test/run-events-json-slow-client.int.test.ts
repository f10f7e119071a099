import net from "node:net";
import type { PrismaClient } from "@agentrun/db";
import { createLargeFinishedRun, createTenant, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import { STALLED_CLIENT_TIMEOUT_MS } from "../src/runs/stalled-client";

// The JSON list of a finished run's events (Accept: application/json), 24 MiB: far more than the
// kernel's socket buffers hold, so a client that does not read leaves most of it with the
// gateway. Event streams of the same run: run-stream-slow-client.int.test.ts.
const RESULT_BYTES = 64 * 1024;
const TOOL_RESULTS = 384;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let path: string;
let eventCount: number;

beforeAll(async () => {
  stack = await startStack({ workers: 0, memory: false });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
  ({ path, eventCount } = await createLargeFinishedRun(prisma, tenant, TOOL_RESULTS, RESULT_BYTES));
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** The gateway's log lines of the clients it disconnected for taking nothing of their answer. */
const STALL_LOG = "disconnected a client that took nothing of its answer in time";
const stallsLogged = () => stack.gateway.output().split(STALL_LOG).length - 1;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends the JSON events request on a raw socket that reads nothing until it is read from. */
async function pausedRequest(): Promise<net.Socket> {
  const { hostname, port } = new URL(stack.gatewayUrl);
  const socket = net.connect(Number(port), hostname);
  socket.pause();
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(
    [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, `Authorization: ${tenant.headers.authorization}`, `X-Agent-Id: ${tenant.agentId}`, "Accept: application/json", "", ""].join("\r\n"),
  );
  return socket;
}

interface Answer {
  head: string;
  body: Buffer;
  /** The Content-Length the answer announced. */
  length: number;
  /** The server closed the connection (rather than the whole body arriving, or `ms` passing). */
  ended: boolean;
}

/**
 * Reads the socket until the server closes it, the whole body (by its Content-Length) has come,
 * or `ms` pass; at most `bytesPerSecond` when given, pausing the socket to keep to that.
 */
function readAnswer(socket: net.Socket, ms: number, bytesPerSecond = Infinity): Promise<Answer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const began = Date.now();
    /** The head's length, with its blank line, once it has come whole. */
    let headBytes = -1;
    let length = NaN;
    const split = () => {
      const all = Buffer.concat(chunks);
      const head = all.subarray(0, Math.max(headBytes - 4, 0)).toString("latin1");
      return { head, body: all.subarray(Math.max(headBytes, 0)), length };
    };
    let done = false;
    const finish = (ended: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...split(), ended });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      received += c.length;
      if (headBytes < 0) {
        const all = Buffer.concat(chunks);
        const at = all.indexOf("\r\n\r\n");
        if (at >= 0) {
          headBytes = at + 4;
          length = Number(/^content-length: *(\d+)$/im.exec(all.subarray(0, at).toString("latin1"))?.[1] ?? NaN);
        }
      }
      if (headBytes >= 0 && received - headBytes >= length) return finish(false);
      const ahead = received / bytesPerSecond - (Date.now() - began) / 1000;
      if (ahead > 0) {
        socket.pause();
        setTimeout(() => socket.resume(), ahead * 1000);
      }
    });
    socket.once("end", () => finish(true));
    socket.once("close", () => finish(true));
    socket.resume();
  });
}

it("closes the connection of a client that takes nothing of a JSON replay for the stall time", async () => {
  const socket = await pausedRequest();
  // The client reads nothing for longer than the gateway waits for it.
  await sleep(STALLED_CLIENT_TIMEOUT_MS + 3000);
  const answer = await readAnswer(socket, 5000);
  expect(answer.head.startsWith("HTTP/1.1 200")).toBe(true);
  expect(answer.length).toBeGreaterThan(TOOL_RESULTS * RESULT_BYTES);
  // The gateway had closed the connection: what the client reads now is only what was already
  // on its way, well short of the whole body.
  expect(answer.ended).toBe(true);
  expect(answer.body.length).toBeLessThan(answer.length);
  expect(stallsLogged()).toBe(1);
}, 60_000);

it("sends the whole JSON replay to a client that reads it more slowly than the stall time", async () => {
  const logged = stallsLogged();
  const socket = await pausedRequest();
  const began = Date.now();
  // 1 MiB/s: 24 s for the body, most of it (past what the socket buffers hold) with the gateway
  // still writing, which takes longer than the stall time.
  const answer = await readAnswer(socket, 50_000, 1024 * 1024);
  expect(Date.now() - began).toBeGreaterThan(STALLED_CLIENT_TIMEOUT_MS * 2);
  expect(answer.head.startsWith("HTTP/1.1 200")).toBe(true);
  expect(answer.body.length).toBe(answer.length);
  const { events } = JSON.parse(answer.body.toString("utf8")) as { events: { seq: number; type: string; result?: string }[] };
  expect(events.map((e) => e.seq)).toEqual(Array.from({ length: eventCount }, (_, i) => i + 1));
  expect(events.at(-1)!.type).toBe("run_completed");
  expect(events.slice(1, -1).every((e) => e.result!.length === RESULT_BYTES)).toBe(true);
  expect(stallsLogged()).toBe(logged);
}, 60_000);

it("sends the whole JSON replay to a client that pauses for less than the stall time", async () => {
  const socket = await pausedRequest();
  await sleep(STALLED_CLIENT_TIMEOUT_MS / 2);
  const answer = await readAnswer(socket, 20_000);
  expect(answer.body.length).toBe(answer.length);
  expect(JSON.parse(answer.body.toString("utf8")).events).toHaveLength(eventCount);
}, 60_000);
