import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { jsonBody } from "@agentrun/json-body";
import { rawExchange, rawHead } from "@agentrun/testing";
import { answerMalformedRequests, continueWithinLimit } from "./raw-answers";

// A server with the answers both services install, around an app that reads JSON bodies of at
// most 100 bytes (its 413 in a plain shape here: the services' error handlers give the contract's).
const LIMIT = 100;
const app = express();
const created: express.RequestHandler = (_req, res) => void res.status(201).json({ ok: true });
const refused: express.ErrorRequestHandler = (err: { status?: number }, _req, res, _next) => void res.status(err.status ?? 500).json({ error: { code: "refused" } });
app.post("/", jsonBody(LIMIT), created);
app.use(refused);
const server = http.createServer(app);
answerMalformedRequests(server, () => "id-of-the-service");
continueWithinLimit(server, LIMIT);
let url = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

it("answers what the parser refuses in the error shape, with an id of the service's making, and closes", async () => {
  const answer = await rawExchange(url, "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}");
  const [head, body] = answer.split("\r\n\r\n");
  expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
  expect(head).toContain("\r\nX-Request-Id: id-of-the-service\r\n");
  expect(head).toMatch(/\r\nConnection: close$/);
  expect(JSON.parse(body!)).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
});

it("invites a body within the limit with 100 Continue, and one declared over it not", async () => {
  const head = (length: number) => rawHead("POST", "/", { "content-type": "application/json", "content-length": String(length), expect: "100-continue", connection: "close" });
  expect(await rawExchange(url, `${head(2)}{}`)).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
  const over = await rawExchange(url, head(LIMIT + 1), { timeoutMs: 3000 });
  expect(over).toMatch(/^HTTP\/1\.1 413 /);
  expect(over).not.toContain("100 Continue");
});
