import { generateWidgetKey } from "@agentrun/api-keys";
import { stackWithTenant, rawExchange, rawHead, type Stack, type Tenant } from "@agentrun/testing";

// Requests as they arrive on the connection, sent raw where fetch would not send them so:
// headers repeated or many, a body declared larger than it is, framing Node's parser refuses.
let stack: Stack;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, tenant } = started), { stack: { workers: 1, gatewayEnv: { AUTH_FAILURE_LIMIT: "100000" } }, tenant: { plan: "enterprise", rpmLimit: 100_000 } });

it("Authorization sent twice, whichever of the two keys is valid", async () => {
  for (const [first, second] of [[tenant.headers.authorization!, "Bearer ar_live_notakey"], ["Bearer ar_live_notakey", tenant.headers.authorization!]]) {
    // fetch joins repeated headers into one; a raw request sends them apart, as a proxy might.
    const answer = await rawExchange(stack.gatewayUrl, `GET /api/memory HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${first}\r\nauthorization: ${second}\r\nx-agent-id: ${tenant.agentId}\r\nconnection: close\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toContain("Send the Authorization header once");
  }
});

it("a request with a thousand small headers is read whole: its Authorization after them counts", async () => {
  const headers: Record<string, string> = {};
  for (let i = 0; i < 1100; i++) headers[`x-pad-${i}`] = "v";
  const res = await fetch(`${stack.gatewayUrl}/api/memory`, { headers: { ...headers, ...tenant.headers } });
  expect(res.status).toBe(200);
});

it("413 payload_too_large from the declared Content-Length, at once, without asking for or reading the body", async () => {
  const head = { ...tenant.headers, "content-type": "application/json", "content-length": "300000000" };
  // Two bytes of the 300 MB it declares: the answer must not wait for the rest.
  const ask = (extra: Record<string, string>) => rawExchange(stack.gatewayUrl, `${rawHead("POST", "/api/run", { ...head, ...extra })}{"`, { timeoutMs: 3000 });
  for (const extra of [{}, { expect: "100-continue" }] as Record<string, string>[]) {
    const answer = await ask(extra);
    expect(answer).not.toContain("100 Continue");
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer).toContain('"code":"payload_too_large"');
  }
});

it.each([
  ["Content-Length sent twice", "POST /api/run HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}", 400],
  ["Content-Length with Transfer-Encoding", "POST /api/run HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", 400],
  ["headers over 16 KiB", `GET /api/tasks HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
])("what Node's parser refuses (%s) is answered in the error shape, with a request id", async (_what, raw, status) => {
  const answer = await rawExchange(stack.gatewayUrl, raw);
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(head).toMatch(/\r\nx-request-id: req_[0-9a-f]{32}\r\n/i);
  expect(JSON.parse(body!)).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
});

it.each([
  ["an Expect other than 100-continue: 417", "POST /api/tasks HTTP/1.1\r\nhost: x\r\nexpect: foo\r\ncontent-type: application/json\r\ncontent-length: 2\r\nx-request-id: mine-417\r\n\r\n", 417],
  ["an HTTP/1.1 request without Host: 400", "GET /healthz HTTP/1.1\r\nx-request-id: mine-400\r\n\r\n", 400],
])("%s, in the error shape, with the request's id, and the connection closes", async (_what, raw, status) => {
  // rawExchange resolves only once the server has closed the connection.
  const answer = await rawExchange(stack.gatewayUrl, raw);
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(head).toMatch(/\r\nx-request-id: mine-4\d\d\r\n/i);
  expect(head).toMatch(/\r\nconnection: close\r\n/i);
  expect(JSON.parse(body!)).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
});

it("CONNECT is answered 404 not_found in the error shape, as a method no route serves, and the connection closes", async () => {
  // rawExchange resolves only once the server has closed the connection.
  const answer = await rawExchange(stack.gatewayUrl, "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n");
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(/^HTTP\/1\.1 404 /);
  expect(head).toMatch(/\r\nx-request-id: req_[0-9a-f]{32}\r\n/i);
  expect(JSON.parse(body!)).toEqual({ error: { code: "not_found", message: "No route for CONNECT example.com:443." } });
});

it("Host may be missing from HTTP/1.0, and Expect: 100-continue is served", async () => {
  expect(await rawExchange(stack.gatewayUrl, "GET /healthz HTTP/1.0\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
  const body = JSON.stringify({ title: "expecting" });
  const head = rawHead("POST", "/api/tasks", { ...tenant.headers, "content-type": "application/json", "content-length": String(body.length), expect: "100-continue", connection: "close" });
  const answer = await rawExchange(stack.gatewayUrl, head + body);
  expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
});

it("a query string is read whole: a parameter after a thousand others counts", async () => {
  // Node's querystring reads 1,000 parameters unless told otherwise. The API's list endpoints
  // refuse parameters they do not read; the widget's demo page reads just one.
  const key = generateWidgetKey();
  const junk = Array.from({ length: 1000 }, (_, i) => `x${i}=0`).join("&");
  const page = await fetch(`${stack.gatewayUrl}/widget-demo?${junk}&key=${key}`);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain(`data-widget-key="${key}"`);
});
