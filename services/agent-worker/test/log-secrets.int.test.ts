import { createTenant, eventually, runJson, startStack, testEnv, testPrisma, type ServiceProcess, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// A model provider that answers 401 quoting the key it was sent (`[echo-key]`: as OpenAI and some
// proxies do) puts the key in the run's failure, which the worker logs with its error's message
// and stack: the worker's log must still not show the key, whether it is OPENAI_API_KEY or an
// agent's own base URL's key from MODEL_API_KEYS.

const HOSTED_KEY = "sk-FAKE-hosted-0123456789abcdefghij";
const OWN_KEY = "sk-FAKE-own-9876543210zyxwvutsrqpo";

let stack: Stack;
let prisma: PrismaClient;
let worker: ServiceProcess;

beforeAll(async () => {
  stack = await startStack({ workers: 0, memory: false });
  prisma = testPrisma(testEnv().databaseUrl);
  // The scripted model is both the "hosted" model (OPENAI_BASE_URL) and, under another host
  // name, an agent's own base URL with its MODEL_API_KEYS key.
  worker = await stack.addWorker({
    LOG_LEVEL: "info",
    OPENAI_API_KEY: HOSTED_KEY,
    OPENAI_BASE_URL: `${stack.modelUrl}/v1`,
    MODEL_API_KEYS: JSON.stringify({ [`${ownBaseUrl()}`]: OWN_KEY }),
  });
});
afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** The scripted model's base URL as an agent's own: `localhost` rather than the hosted 127.0.0.1. */
const ownBaseUrl = () => `${stack.modelUrl.replace("127.0.0.1", "localhost")}/v1`;

it.each([
  ["OPENAI_API_KEY", HOSTED_KEY, { model: "gpt-test" }],
  ["a MODEL_API_KEYS key", OWN_KEY, { model: "own-model", baseUrl: "own" }],
] as const)("keeps %s out of the worker's log when the model echoes it in a 401", async (_name, key, agent) => {
  const tenant = await createTenant(prisma);
  await prisma.agent.update({ where: { id: tenant.agentId }, data: { model: agent.model, baseUrl: "baseUrl" in agent ? ownBaseUrl() : null } });

  const { body } = await runJson(stack.gatewayUrl, tenant.headers, { query: "[error:401][echo-key] hi" });
  const runId: string = body.id ?? body.run_id ?? body.error?.details?.run_id;
  expect(runId).toEqual(expect.any(String));
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true } })).toEqual({ status: "failed" });

  // The failure is logged, with the provider's message and the error's stack, but not the key.
  const failedLine = () => worker.output().split("\n").find((line) => line.includes('"run failed"') && line.includes(runId));
  const line = JSON.parse(await eventually(async () => failedLine()));
  expect(line.err.message).toContain("Incorrect API key provided: Bearer [redacted]");
  expect(line.err.stack).toContain("[redacted]");
  expect(line.detail).toContain("[redacted]");
  expect(worker.output()).not.toContain(key);
  expect(worker.output()).not.toContain("sk-FAKE");
}, 30_000);
