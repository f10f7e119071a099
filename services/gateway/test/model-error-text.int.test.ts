import type { PrismaClient } from "@agentrun/db";
import { createTenant, createWidgetKey, eventually, freePort, readSse, runJson, startService, startStack, testEnv, testPrisma, waitForOk, type ServiceProcess, type Stack, type Tenant } from "@agentrun/testing";

// A model provider whose error text echoes the request's key, as some providers and proxies do
// (a scripted model of its own, with `[echo-key]`): API clients and anonymous widget visitors get
// a fixed message with the status and the provider's error code; the text goes to the worker's
// log only. A stack of its own, since its worker holds a key for this provider.
const ORIGIN = "https://shop.example";
const WIDGET_SECRET = "model-error-text-test-secret-0123456789abcdef";
const MODEL_KEY = "sk-live-0123456789abcdefSECRET";

let provider: ServiceProcess;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let widgetKey: string;

beforeAll(async () => {
  const port = await freePort();
  provider = startService("scripted-model", { SCRIPTED_MODEL_PORT: String(port), SCRIPTED_MODEL_HOST: "127.0.0.1" });
  const modelUrl = `http://127.0.0.1:${port}/v1`;
  await waitForOk(`${modelUrl}/models`, provider);

  stack = await startStack({ workers: 1, memory: false, gatewayEnv: { WIDGET_TOKEN_SECRET: WIDGET_SECRET }, workerEnv: { MODEL_API_KEYS: JSON.stringify({ [modelUrl]: MODEL_KEY }) } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
  await prisma.agent.update({ where: { id: tenant.agentId }, data: { model: "gpt-test", baseUrl: modelUrl } });
  widgetKey = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
  await provider?.stop();
});

/** Nothing the provider wrote (the key, its addresses) is in `value`. */
function expectNoProviderText(value: unknown) {
  const text = JSON.stringify(value);
  expect(text).not.toContain(MODEL_KEY);
  expect(text).not.toMatch(/Bearer|Incorrect API key|scripted error/);
}

/** The worker logged the provider's text for this run at warn (pino level 40), the key it echoed redacted. */
async function expectLoggedForOperator(runId: string) {
  // The worker's output reaches this process through a pipe, possibly after the run's end.
  const logged = () => stack.workers[0]!.output().split("\n").find((l) => l.includes(runId) && l.includes("run failed"));
  const line = JSON.parse(await eventually(async () => logged(), { timeoutMs: 5000 })) as { level: number; detail: string };
  expect(line.level).toBe(40);
  expect(line.detail).toContain("Incorrect API key provided: Bearer [redacted]");
  expect(JSON.stringify(line)).not.toContain(MODEL_KEY);
}

it("answers an API client a fixed message with the status and the provider's code; the provider's text is only in the worker's log", async () => {
  const res = await runJson(stack.gatewayUrl, tenant.headers, { query: "hello [error:401][echo-key]" });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ status: "failed", error: { code: "model_error", message: "The model answered 401 (invalid_api_key)." } });
  expectNoProviderText(res.body);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id }, include: { events: true } });
  expect(run.errorMessage).toBe("The model answered 401 (invalid_api_key).");
  expectNoProviderText(run);
  await expectLoggedForOperator(run.id);
});

it("keeps the failure codes: 429 is model_rate_limited", async () => {
  const res = await runJson(stack.gatewayUrl, tenant.headers, { query: "hello [error:429][echo-key]" });
  expect(res.body).toMatchObject({ status: "failed", error: { code: "model_rate_limited", message: "The model answered 429 (rate_limit_exceeded): the request was rate limited." } });
  expectNoProviderText(res.body);
});

it("streams an anonymous widget visitor run_failed without the provider's text, also for an error inside the streamed answer", async () => {
  for (const [query, message] of [
    ["hello [error:401][echo-key]", "The model answered 401 (invalid_api_key)."],
    ["hello [stream-error][echo-key]", "The model reported an error while answering (server_error)."],
  ]) {
    const res = await readSse(`${stack.gatewayUrl}/api/v1/widget/run`, { body: { query }, headers: { "x-widget-key": widgetKey, origin: ORIGIN } });
    expect(res.status).toBe(200);
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "run_failed"]);
    expect(res.events[1]!.data.error).toEqual({ code: "model_error", message });
    expectNoProviderText(res.events);
    await expectLoggedForOperator(res.events[0]!.data.run_id);
  }
});
