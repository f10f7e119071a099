import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";
import { createTenant, readSse, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";

// The memory service hanging, then gone, while the gateway and the worker keep working. A
// stack of its own, since it freezes and stops the memory service.
const MEMORY_TIMEOUT_MS = 1000;
/** Longest a memory request may take when the service is down or hangs: the timeout plus slack. */
const MAX_503_MS = 3000;

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let savedId: string;

beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { MEMORY_TIMEOUT_MS: String(MEMORY_TIMEOUT_MS) } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { instructions: "Be brief." });
  // Seeded straight through the internal API, without the client's timeout: a fresh service's
  // first requests pay for its database connection (about a second under load), which the short
  // timeout of this file is not meant to measure.
  const scope = { org_id: tenant.orgId, agent_id: tenant.agentId };
  const headers = { authorization: `Bearer ${stack.env.INTERNAL_TOKEN}`, "content-type": "application/json" };
  const created = await fetch(`${stack.memoryUrl}/internal/memories`, { method: "POST", headers, body: JSON.stringify({ ...scope, user_id: "u1", content: "Likes green tea" }) });
  expect(created.status).toBe(201);
  savedId = ((await created.json()) as { memory: { memory_id: string } }).memory.memory_id;
  const warm = await fetch(`${stack.memoryUrl}/internal/memories?org_id=${scope.org_id}&agent_id=${scope.agent_id}`, { headers });
  expect(warm.status).toBe(200);
  const listed = await memoryRequest("GET", "/api/memory?user_id=u1");
  expect(listed.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([savedId]);
});

afterAll(async () => {
  // A frozen process would only act on SIGTERM once continued.
  stack?.memory?.child.kill("SIGCONT");
  await stack?.stop();
  await prisma?.$disconnect();
});

async function memoryRequest(method: string, path: string, body?: object): Promise<{ status: number; body: any; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${stack.gatewayUrl}${path}`, {
    method,
    headers: { ...tenant.headers, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, ms: Date.now() - started };
}

/** Every memory endpoint answers 503 unavailable, each well within MAX_503_MS. */
async function expectAllUnavailable(): Promise<void> {
  const replies = await Promise.all([
    memoryRequest("GET", "/api/memory?user_id=u1"),
    memoryRequest("GET", "/api/memory"),
    memoryRequest("POST", "/api/memory", { content: "Likes black coffee", user_id: "u1" }),
    // An unknown id: up, the service would answer 404, so only 503 shows it was not reached.
    memoryRequest("DELETE", "/api/memory/mem_00000000000000000000000000000000"),
  ]);
  for (const r of replies) {
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe("unavailable");
    expect(r.body.error.message).not.toMatch(/ECONN|fetch|stack|internal/i);
    expect(r.ms).toBeLessThan(MAX_503_MS);
  }
}

/** A memory_save run for u1: it completes, and the tool result is the error `unavailable`. */
async function expectRunSurvives(): Promise<void> {
  const started = Date.now();
  const res = await readSse(`${stack.gatewayUrl}/api/run`, {
    body: { query: '[call:memory_save {"content":"Likes black coffee","category":"preference"}]', context: { user_id: "u1" } },
    headers: tenant.headers,
    timeoutMs: 20_000,
  });
  const events = res.events.map((e) => e.data);
  expect(events[1]).toMatchObject({ type: "tool_call", tool: "memory", action: "save" });
  expect(events[2]).toMatchObject({ type: "tool_result", tool: "memory", result: { error: { code: "unavailable", message: expect.any(String) } } });
  expect(events.at(-1).type).toBe("run_completed");
  // The prompt's memories and the tool each wait at most MEMORY_TIMEOUT_MS.
  expect(Date.now() - started).toBeLessThan(2 * MEMORY_TIMEOUT_MS + 5000);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: events[0].run_id } });
  expect(run.status).toBe("completed");
  // Nothing lost: the stream is what was stored.
  expect(await readDbEvents({ prisma }, run.id)).toEqual(events);
}

/** The run goes on without the memories: the prompt is the instructions alone. */
async function expectPromptWithoutMemories(): Promise<void> {
  const res = await fetch(`${stack.gatewayUrl}/api/run`, {
    method: "POST",
    headers: { ...tenant.headers, "content-type": "application/json" },
    body: JSON.stringify({ query: "[echo-system]", context: { user_id: "u1" }, stream: false }),
  });
  const run = (await res.json()) as { status: string; output: string };
  expect(run).toMatchObject({ status: "completed", output: "Be brief." });
}

describe("memory service hanging (process frozen)", () => {
  beforeAll(() => {
    stack.memory!.child.kill("SIGSTOP");
  });
  afterAll(() => {
    stack.memory!.child.kill("SIGCONT");
  });

  it("answers 503 unavailable after the client's timeout instead of hanging", expectAllUnavailable);
  it("completes a run whose memory_save times out, with an error result", expectRunSurvives);
});

describe("memory service back", () => {
  // Requests that timed out while it was frozen may still be applied once it resumes (they sat
  // in its socket buffer), so only what existed before is checked.
  it("serves the memory API again, with the earlier entry kept", async () => {
    // The resumed process first works through the requests queued while it was frozen.
    let res = await memoryRequest("GET", "/api/memory?user_id=u1");
    for (const deadline = Date.now() + 5000; res.status !== 200 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      res = await memoryRequest("GET", "/api/memory?user_id=u1");
    }
    expect(res.status).toBe(200);
    expect(res.body.memories.map((m: { memory_id: string }) => m.memory_id)).toContain(savedId);
  });
});

describe("memory service stopped", () => {
  beforeAll(async () => {
    await stack.memory!.stop();
  });

  it("answers 503 unavailable quickly on every memory endpoint", expectAllUnavailable);
  it("completes a run whose memory_save fails, with an error result", expectRunSurvives);
  it("runs without the user's memories in the prompt", expectPromptWithoutMemories);
});
