import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { newId, type PrismaClient } from "@agentrun/db";
import { generateWidgetKey } from "@agentrun/api-keys";
import { createTenant, eventually, readSse, runJson, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";

// A model provider whose error text echoes the request's key, as some providers and proxies do:
// API clients and anonymous widget visitors get a fixed message with the status and the
// provider's error code; the text goes to the worker's log only. A stack of its own, since its
// worker holds a key for this provider.
const ORIGIN = "https://shop.example";
const WIDGET_SECRET = "model-error-text-test-secret-0123456789abcdef";
const MODEL_KEY = "sk-live-0123456789abcdefSECRET";

let provider: Server;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let widgetKey: string;

/**
 * The provider: the last user message names the failure. `401`, `429`: an error status whose
 * message repeats the Authorization header; `stream`: a 200 stream whose first chunk is an error.
 */
function answer(query: string, authorization: string) {
  const message = `Incorrect API key provided: ${authorization}. Request from 10.1.2.3 (internal-proxy-7).`;
  if (query.includes("[stream]")) return { status: 200, body: `data: ${JSON.stringify({ error: { message, type: "server_error", code: "server_error" } })}\n\n` };
  if (query.includes("[429]")) return { status: 429, body: JSON.stringify({ error: { message, type: "rate_limit_error", code: "rate_limit_exceeded" } }) };
  return { status: 401, body: JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code: "invalid_api_key" } }) };
}

beforeAll(async () => {
  provider = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const messages = (JSON.parse(raw) as { messages: { role: string; content: string }[] }).messages;
      const { status, body } = answer(messages.findLast((m) => m.role === "user")?.content ?? "", req.headers.authorization ?? "");
      res.writeHead(status, { "content-type": status === 200 ? "text/event-stream" : "application/json" }).end(body);
    });
  });
  provider.listen(0, "127.0.0.1");
  await once(provider, "listening");
  const modelUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;

  stack = await startStack({ workers: 1, memory: false, gatewayEnv: { WIDGET_TOKEN_SECRET: WIDGET_SECRET }, workerEnv: { MODEL_API_KEYS: JSON.stringify({ [modelUrl]: MODEL_KEY }) } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
  await prisma.agent.update({ where: { id: tenant.agentId }, data: { model: "gpt-test", baseUrl: modelUrl } });
  widgetKey = generateWidgetKey();
  await prisma.widgetKey.create({ data: { id: newId("wk"), agentId: tenant.agentId, key: widgetKey, allowedOrigins: [ORIGIN] } });
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
  provider?.closeAllConnections();
  await new Promise((resolve) => provider?.close(resolve));
});

/** Nothing the provider wrote (the key, its addresses) is in `value`. */
function expectNoProviderText(value: unknown) {
  const text = JSON.stringify(value);
  expect(text).not.toContain(MODEL_KEY);
  expect(text).not.toMatch(/Bearer|Incorrect API key|10\.1\.2\.3|internal-proxy/);
}

/** The worker logged the provider's text for this run at warn (pino level 40). */
async function expectLoggedForOperator(runId: string) {
  // The worker's output reaches this process through a pipe, possibly after the run's end.
  const logged = () => stack.workers[0]!.output().split("\n").find((l) => l.includes(runId) && l.includes("run failed"));
  const line = JSON.parse(await eventually(async () => logged(), { timeoutMs: 5000 })) as { level: number; detail: string };
  expect(line.level).toBe(40);
  expect(line.detail).toContain(`Incorrect API key provided: Bearer ${MODEL_KEY}`);
}

it("answers an API client a fixed message with the status and the provider's code; the provider's text is only in the worker's log", async () => {
  const res = await runJson(stack.gatewayUrl, tenant.headers, { query: "hello [401]" });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ status: "failed", error: { code: "model_error", message: "The model answered 401 (invalid_api_key)." } });
  expectNoProviderText(res.body);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id }, include: { events: true } });
  expect(run.errorMessage).toBe("The model answered 401 (invalid_api_key).");
  expectNoProviderText(run);
  await expectLoggedForOperator(run.id);
});

it("keeps the failure codes: 429 is model_rate_limited", async () => {
  const res = await runJson(stack.gatewayUrl, tenant.headers, { query: "hello [429]" });
  expect(res.body).toMatchObject({ status: "failed", error: { code: "model_rate_limited", message: "The model answered 429 (rate_limit_exceeded): the request was rate limited." } });
  expectNoProviderText(res.body);
});

it("streams an anonymous widget visitor run_failed without the provider's text, also for an error inside the streamed answer", async () => {
  for (const [query, message] of [
    ["hello [401]", "The model answered 401 (invalid_api_key)."],
    ["hello [stream]", "The model reported an error while answering (server_error)."],
  ]) {
    const res = await readSse(`${stack.gatewayUrl}/api/v1/widget/run`, { body: { query }, headers: { "x-widget-key": widgetKey, origin: ORIGIN } });
    expect(res.status).toBe(200);
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
    expect(res.events[1]!.data.error).toEqual({ code: "model_error", message });
    expectNoProviderText(res.events);
    await expectLoggedForOperator(res.events[0]!.data.run_id);
  }
});
