import { eventually, logLinesOf, rawExchange, rawHead, startMemoryService, type MemoryService } from "@agentrun/testing";

// Requests sent raw to the memory service's port, as its server (not only its app) answers them:
// what Node's parser refuses, and Expect: 100-continue. The gateway's server answers them alike.

let service: MemoryService;

beforeAll(async () => {
  // At info, to read the line each refused request leaves.
  service = await startMemoryService({ LOG_LEVEL: "info" });
});

/** The memory service's JSON log lines so far. */
const logLines = () => logLinesOf(service.process);

afterAll(async () => {
  await service.stop();
});

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

// Authorized, so that the app would read the body: the refusal is the parser's, not a 401.
const AUTHORIZED = () => `authorization: Bearer ${service.token}\r\n`;

it.each([
  ["an Authorization header of 20 KB", () => `GET /internal/memories HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${"a".repeat(20_000)}\r\n\r\n`, 431],
  ["Content-Length: abc", () => `POST /internal/memories HTTP/1.1\r\nhost: x\r\n${AUTHORIZED()}content-type: application/json\r\ncontent-length: abc\r\n\r\n{}`, 400],
  ["broken chunking", () => `POST /internal/memories HTTP/1.1\r\nhost: x\r\n${AUTHORIZED()}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400],
])("what Node's parser refuses (%s) is answered in the error shape, with a request id the log names, and the connection closes", async (_what, raw, status) => {
  // rawExchange resolves only once the server has closed the connection.
  const answer = await rawExchange(service.url, raw());
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(head).toMatch(new RegExp(`\\r\\nx-request-id: ${UUID}\\r\\n`, "i"));
  expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
  expect(JSON.parse(body!)).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
  // The app's access line never sees such a request: the server's own line leads from the id.
  const requestId = new RegExp(`\\r\\nx-request-id: (${UUID})\\r\\n`, "i").exec(head!)![1];
  const line = await eventually(async () => logLines().find((l) => l.requestId === requestId), { timeoutMs: 5000, intervalMs: 50 });
  expect(line).toMatchObject({ level: 30, service: "memory", status, code: expect.stringMatching(/^HPE_/) });
});

it("Expect: 100-continue with a body declared over the limit gets 413 without a 100 Continue", async () => {
  const head = rawHead("POST", "/internal/memories", { authorization: `Bearer ${service.token}`, "content-type": "application/json", "content-length": "2000000", expect: "100-continue" });
  const answer = await rawExchange(service.url, head, { timeoutMs: 3000 });
  expect(answer).not.toContain("100 Continue");
  const [status, body] = answer.split("\r\n\r\n");
  expect(status).toMatch(/^HTTP\/1\.1 413 /);
  expect(status).toMatch(new RegExp(`\\r\\nx-request-id: ${UUID}\\r\\n`, "i"));
  expect(JSON.parse(body!)).toEqual({ error: { code: "payload_too_large", message: expect.any(String) } });
});

it("Expect: 100-continue with a body within the limit is invited and served", async () => {
  const body = JSON.stringify({ org_id: "org_raw_continue", agent_id: "agt_raw_continue", user_id: "u", content: "expecting" });
  const head = rawHead("POST", "/internal/memories", {
    authorization: `Bearer ${service.token}`,
    "content-type": "application/json",
    "content-length": String(body.length),
    expect: "100-continue",
    connection: "close",
  });
  const answer = await rawExchange(service.url, head + body);
  expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 20[01] /);
});

it("its start-up line shows the settings it runs with, the internal token hidden", async () => {
  const start = await eventually(async () => logLines().find((l) => l.msg === "memory service listening"), { timeoutMs: 5000, intervalMs: 50 });
  expect(start.settings).toMatchObject({ MEMORY_HOST: "127.0.0.1", MEMORY_PORT: start.port, DB_POOL_SIZE: expect.any(Number), INTERNAL_TOKEN: "[hidden]" });
  expect(service.process.output()).not.toContain(service.token);
});
