import http from "node:http";
import net from "node:net";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// How request bodies are read: as they arrive (chunked), and in a content coding.
let stack: Stack;
let tenant: Tenant;
const LIMIT = 64 * 1024;

stackWithTenant((started) => ({ stack, tenant } = started), {
  stack: { workers: 0, memory: false, gatewayEnv: { BODY_LIMIT_BYTES: String(LIMIT), AUTH_FAILURE_LIMIT: "100000", REQUEST_TIMEOUT_MS: "1500" } },
  tenant: { plan: "enterprise", rpmLimit: 100_000 },
});

// The first test must get its 413 before the request timeout (1.5 s) ends its endless body: the
// gateway's first authenticated request (a database connection, the key's lookup) is made here,
// so that a loaded machine does not spend that time on it.
beforeAll(async () => {
  const res = await fetch(`${stack.gatewayUrl}/api/tasks?limit=1`, { headers: tenant.headers });
  expect(res.status).toBe(200);
});

/** POST /api/tasks with `body` sent as it is, under `headers`; the status and the parsed answer. */
async function postTasks(body: Buffer, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  const res = await fetch(`${stack.gatewayUrl}/api/tasks`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json", ...headers }, body });
  return { status: res.status, json: await res.json() };
}

it("a chunked body is answered 413 as soon as it passes the limit, while the client is still sending", async () => {
  const url = new URL(`${stack.gatewayUrl}/api/tasks`);
  const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { ...tenant.headers, "content-type": "application/json" } });
  req.on("error", () => {});
  let sent = 0;
  let answered = false;
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const cutOff = setTimeout(() => reject(new Error(`no answer within 5 s; ${sent} bytes sent`)), 5000);
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => {
        clearTimeout(cutOff);
        resolve({ status: res.statusCode!, body });
      });
    });
  });
  // An endless body: 16 KiB at a time, as fast as the connection takes it, until the answer.
  const chunk = Buffer.alloc(16 * 1024, 0x20);
  req.write("{");
  void (async () => {
    while (!answered && !req.destroyed && sent < 200 * 1024 * 1024) {
      sent += chunk.length;
      if (req.write(chunk)) continue;
      await new Promise<void>((resolve) => {
        const go = () => {
          req.off("drain", go).off("close", go);
          resolve();
        };
        req.on("drain", go).on("close", go);
      });
    }
  })();
  try {
    const { status, body } = await answer;
    expect(status).toBe(413);
    expect(JSON.parse(body)).toEqual({ error: { code: "payload_too_large", message: expect.stringContaining(String(LIMIT)) } });
    expect(sent).toBeGreaterThan(LIMIT);
  } finally {
    req.destroy();
  }
});

it("reads a body in gzip, deflate or br, and counts the limit on what it decodes to", async () => {
  const json = Buffer.from(JSON.stringify({ title: "compressed" }));
  for (const [coding, encoded] of [
    ["gzip", gzipSync(json)],
    ["deflate", deflateSync(json)],
    ["br", brotliCompressSync(json)],
  ] as const) {
    const { status, json: task } = await postTasks(encoded, { "content-encoding": coding });
    expect([coding, status, task.title]).toEqual([coding, 201, "compressed"]);
  }
  // 200 bytes of gzip that decode to 4 times the limit.
  const bomb = gzipSync(Buffer.from(`{"title":"${" ".repeat(4 * LIMIT)}"}`));
  expect(bomb.length).toBeLessThan(LIMIT / 10);
  const big = await postTasks(bomb, { "content-encoding": "gzip" });
  expect([big.status, big.json.error.code]).toEqual([413, "payload_too_large"]);
});

it("a body that is not what its coding says is 400, an unknown coding 415", async () => {
  const broken = await postTasks(Buffer.from('{"title":"not gzip"}'), { "content-encoding": "gzip" });
  expect(broken.status).toBe(400);
  expect(broken.json.error).toEqual({ code: "invalid_request", message: expect.stringContaining("gzip") });
  const unknown = await postTasks(Buffer.from('{"title":"x"}'), { "content-encoding": "compress" });
  expect(unknown.status).toBe(415);
  expect(unknown.json.error).toEqual({ code: "unsupported_media_type", message: expect.stringContaining("compress") });
  // Names an object has of its own kind are codings like any other unknown one.
  for (const coding of ["constructor", "__proto__", "hasOwnProperty", "toString"]) {
    const odd = await postTasks(Buffer.from('{"title":"x"}'), { "content-encoding": coding });
    expect([coding, odd.status, odd.json.error.code]).toEqual([coding, 415, "unsupported_media_type"]);
  }
  // An empty Content-Encoding is none at all.
  expect((await postTasks(Buffer.from('{"title":"plain"}'), { "content-encoding": "" })).status).toBe(201);
  // The gateway still serves requests afterwards.
  expect((await postTasks(Buffer.from('{"title":"after"}'), {})).status).toBe(201);
  expect((await fetch(`${stack.gatewayUrl}/healthz`)).status).toBe(200);
});

/** `body` sent chunked over a raw connection under `Transfer-Encoding: transfer`; the status and the parsed answer. */
async function postTasksInTransferCoding(transfer: string, body: Buffer): Promise<{ status: number; json: any }> {
  const url = new URL(stack.gatewayUrl);
  const socket = net.connect(Number(url.port), url.hostname);
  const chunks: Buffer[] = [];
  socket.on("data", (d: Buffer) => chunks.push(d));
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const head = Object.entries({ ...tenant.headers, host: url.host, "content-type": "application/json", "transfer-encoding": transfer, connection: "close" })
    .map(([k, v]) => `${k}: ${v}`)
    .join("\r\n");
  socket.write(`POST /api/tasks HTTP/1.1\r\n${head}\r\n\r\n`);
  socket.write(Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]));
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))]);
  socket.destroy();
  const answer = Buffer.concat(chunks).toString("utf8");
  const [statusLine, ...rest] = answer.split("\r\n");
  const payload = rest.slice(rest.indexOf("") + 1).join("\r\n");
  return { status: Number(statusLine!.split(" ")[1]), json: JSON.parse(/transfer-encoding: chunked/i.test(answer) ? payload.split("\r\n")[1]! : payload) };
}

it("a transfer coding besides chunked is 415, and nothing is created; chunked alone, in any case, is read", async () => {
  const total = async () => ((await (await fetch(`${stack.gatewayUrl}/api/tasks`, { headers: tenant.headers })).json()) as { total: number }).total;
  const before = await total();
  const plain = Buffer.from('{"title":"framed"}');
  for (const [transfer, body] of [
    ["gzip, chunked", plain],
    ["gzip, chunked", gzipSync(plain)],
    ["deflate,chunked", deflateSync(plain)],
    ["x-custom , Chunked", plain],
  ] as const) {
    const { status, json } = await postTasksInTransferCoding(transfer, body);
    expect([transfer, status, json.error?.code]).toEqual([transfer, 415, "unsupported_media_type"]);
    expect(json.error.message).toContain("Transfer-Encoding");
  }
  expect(await total()).toBe(before);
  for (const transfer of ["chunked", "Chunked", " chunked "]) {
    const { status, json } = await postTasksInTransferCoding(transfer, plain);
    expect([transfer, status, json.title]).toEqual([transfer, 201, "framed"]);
  }
});

it("a request answered 413 while its body keeps coming gets that one answer, and its connection closes", async () => {
  const url = new URL(stack.gatewayUrl);
  const socket = net.connect(Number(url.port), url.hostname);
  let received = "";
  socket.on("data", (d: Buffer) => (received += d.toString("latin1")));
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const head = Object.entries({ ...tenant.headers, host: url.host, "content-type": "application/json", "transfer-encoding": "chunked" })
    .map(([k, v]) => `${k}: ${v}`)
    .join("\r\n");
  socket.write(`POST /api/tasks HTTP/1.1\r\n${head}\r\n\r\n`);
  const chunk = (size: number) => `${size.toString(16)}\r\n${" ".repeat(size)}\r\n`;
  socket.write(chunk(2 * LIMIT));
  // Then a trickle, past the request timeout (1.5 s) and the drain after the answer (2 s).
  const trickle = setInterval(() => socket.writable && socket.write(chunk(16)), 100);
  try {
    await Promise.race([closed, new Promise((r) => setTimeout(r, 6000))]);
  } finally {
    clearInterval(trickle);
    socket.destroy();
  }
  expect(received.match(/HTTP\/1\.1 \d{3} /g)).toEqual(["HTTP/1.1 413 "]);
  expect(socket.readyState).toBe("closed");
});
