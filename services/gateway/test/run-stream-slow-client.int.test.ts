import net from "node:net";
import type { PrismaClient } from "@agentrun/db";
import { createLargeFinishedRun, createTenant, readSse, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import { STALLED_CLIENT_TIMEOUT_MS } from "../src/runs/sse";

// A finished run with 16 MiB of events: far more than the kernel's socket buffers hold, so a
// client that does not read leaves most of it with the gateway.
const RESULT_BYTES = 64 * 1024;
const TOOL_RESULTS = 256;
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends the events request on a raw socket that reads nothing until `resume` is called. */
async function pausedRequest(): Promise<net.Socket> {
  const { hostname, port } = new URL(stack.gatewayUrl);
  const socket = net.connect(Number(port), hostname);
  socket.pause();
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(
    [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, `Authorization: ${tenant.headers.authorization}`, `X-Agent-Id: ${tenant.agentId}`, "Accept: text/event-stream", "", ""].join("\r\n"),
  );
  return socket;
}

/**
 * Reads the socket until the server closes it (`ended`), the chunked body ends (the last chunk)
 * or `ms` pass.
 */
function readRest(socket: net.Socket, ms: number): Promise<{ text: string; ended: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString("latin1"), ended });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      if (c.toString("latin1").endsWith("\r\n0\r\n\r\n")) finish(false);
    });
    socket.once("end", () => finish(true));
    socket.once("close", () => finish(true));
    socket.resume();
  });
}

const seqsIn = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

it("closes the stream of a client that stops reading, dropping what it had buffered", async () => {
  const socket = await pausedRequest();
  // The client reads nothing for longer than the gateway waits for it.
  await sleep(STALLED_CLIENT_TIMEOUT_MS + 3000);
  const { text, ended } = await readRest(socket, 5000);
  expect(text.startsWith("HTTP/1.1 200")).toBe(true);
  // The gateway had closed the connection: what the client reads now is only what was already
  // on its way, ending well before the terminal event.
  expect(ended).toBe(true);
  const seqs = seqsIn(text);
  expect(seqs.length).toBeGreaterThan(0);
  expect(seqs.length).toBeLessThan(eventCount);
  expect(text).not.toContain('"type":"run_completed"');

  // The client re-attaches where it stopped and gets the rest.
  const lastSeen = Math.max(...seqs.slice(0, -1), 0);
  const rest = await readSse(`${stack.gatewayUrl}${path}`, { headers: { ...tenant.headers, "last-event-id": String(lastSeen) } });
  expect(rest.events.map((e) => Number(e.id))).toEqual(Array.from({ length: eventCount - lastSeen }, (_, i) => lastSeen + 1 + i));
}, 60_000);

it("replays every event to a reader, also one that pauses for a while", async () => {
  const res = await readSse(`${stack.gatewayUrl}${path}`, { headers: tenant.headers });
  expect(res.status).toBe(200);
  expect(res.events.map((e) => Number(e.id))).toEqual(Array.from({ length: eventCount }, (_, i) => i + 1));
  expect(res.events.at(-1)!.data.type).toBe("run_completed");
  expect(res.events.slice(1, -1).every((e) => e.data.result.length === RESULT_BYTES)).toBe(true);

  const socket = await pausedRequest();
  await sleep(STALLED_CLIENT_TIMEOUT_MS / 2);
  const slow = await readRest(socket, 10_000);
  expect(seqsIn(slow.text)).toEqual(Array.from({ length: eventCount }, (_, i) => i + 1));
  expect(slow.text).toContain('"type":"run_completed"');
}, 60_000);
