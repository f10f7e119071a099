import type { PrismaClient } from "@agentrun/db";
import { createTenant, readSse, runJson, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";

// Memory as the agent uses it: saved and searched through the worker's tools, and put into the
// system prompt of later runs. One stack for the whole file: its worker puts at most 3 memories
// into a prompt, which the tests with fewer memories per user never reach.
const PROMPT_MAX_COUNT = 3;
const MEMORY_HEADER = "What you remember about this user:";

let stack: Stack;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ workers: 1, workerEnv: { MEMORY_PROMPT_MAX_COUNT: String(PROMPT_MAX_COUNT) } });
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** A streamed run's events (data only). */
async function runStream(t: Tenant, body: object): Promise<any[]> {
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body, headers: t.headers });
  expect(res.status).toBe(200);
  return res.events.map((e) => e.data);
}

/** A run with `stream: false`: the Run object with tool_calls. */
async function completedRun(t: Tenant, body: Record<string, unknown>): Promise<any> {
  const res = await runJson(stack.gatewayUrl, t.headers, { ...body, stream: false });
  expect(res.status).toBe(200);
  expect(res.body.status).toBe("completed");
  return res.body;
}

/** The system prompt the model was given, via the scripted model's `[echo-system]`, in a new task. */
async function systemPrompt(t: Tenant, userId: string | undefined, words = ""): Promise<string> {
  const run = await completedRun(t, { query: `[echo-system] ${words}`.trim(), ...(userId ? { context: { user_id: userId } } : {}) });
  return run.output as string;
}

/** The memory lines of a system prompt, e.g. `(preference) Likes tea`. */
const promptMemories = (prompt: string): string[] => prompt.split("\n").filter((l) => l.startsWith("- (")).map((l) => l.slice(2));

async function seed(t: Tenant, userId: string, contents: string[]): Promise<void> {
  for (const content of contents) {
    const res = await fetch(`${stack.gatewayUrl}/api/memory`, { method: "POST", headers: { ...t.headers, "content-type": "application/json" }, body: JSON.stringify({ content, user_id: userId }) });
    expect(res.status).toBe(201);
  }
}

describe("memory_save and the prompt of later runs", () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(prisma, { instructions: "You are a helpful assistant." });
  });

  it("saves through the tool, shows the memory to the same user's new task only, and lists it", async () => {
    const content = "The user's favourite colour is teal";
    const events = await runStream(tenant, { query: `[call:memory_save ${JSON.stringify({ content, category: "preference" })}]`, context: { user_id: "u1" } });
    expect(events.map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", ...events.slice(3, -1).map(() => "text_chunk"), "run_completed"]);
    expect(events[1]).toMatchObject({ type: "tool_call", tool: "memory", action: "save", params: { content, category: "preference" } });
    expect(events[2]).toMatchObject({ type: "tool_result", tool: "memory", result: { saved: true, duplicate: false } });
    const memoryId = events[2].result.memory_id as string;
    expect(memoryId).toMatch(/^mem_/);

    const mine = await systemPrompt(tenant, "u1");
    expect(mine).toBe(`You are a helpful assistant.\n\n${MEMORY_HEADER}\n- (preference) ${content}`);
    const theirs = await systemPrompt(tenant, "u2");
    expect(theirs).toBe("You are a helpful assistant.");
    expect(await systemPrompt(tenant, undefined)).toBe("You are a helpful assistant.");

    const listed = await fetch(`${stack.gatewayUrl}/api/memory?user_id=u1`, { headers: tenant.headers });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as any).memories).toEqual([{ memory_id: memoryId, content, category: "preference", user_id: "u1", created_at: expect.stringMatching(/Z$/) }]);
    const ofU2 = await fetch(`${stack.gatewayUrl}/api/memory?user_id=u2`, { headers: tenant.headers });
    expect(((await ofU2.json()) as any).memories).toEqual([]);
  });

  it("reports a repeated save as a duplicate of the same entry", async () => {
    const query = '[call:memory_save {"content":"Allergic to peanuts","category":"fact"}]';
    const first = await completedRun(tenant, { query, context: { user_id: "u-dup" } });
    const second = await completedRun(tenant, { query, context: { user_id: "u-dup" } });
    expect(first.tool_calls[0].result).toMatchObject({ saved: true, duplicate: false });
    expect(second.tool_calls[0].result).toEqual({ saved: true, duplicate: true, memory_id: first.tool_calls[0].result.memory_id });
  });

  it("gives the model an error result when the run has no user_id, and the run completes", async () => {
    const run = await completedRun(tenant, { query: '[call:memory_save {"content":"nobody to remember this for"}]' });
    expect(run.tool_calls).toEqual([
      { tool: "memory", action: "save", params: { content: "nobody to remember this for" }, result: { error: { code: "no_user", message: expect.any(String) } } },
    ]);
  });
});

describe("memory_search", () => {
  it("returns the memory most relevant to the query first", async () => {
    const tenant = await createTenant(prisma);
    await seed(tenant, "searcher", ["Lives in Berlin", "Likes green tea", "Has a dog named Rex", "Works as a nurse"]);
    const events = await runStream(tenant, { query: '[call:memory_search {"query":"what tea does the user like"}]', context: { user_id: "searcher" } });
    expect(events[1]).toMatchObject({ type: "tool_call", tool: "memory", action: "search", params: { query: "what tea does the user like" } });
    expect(events[2].type).toBe("tool_result");
    const found = events[2].result.memories as Array<{ content: string; category: string; created_at: string }>;
    expect(found[0]).toEqual({ content: "Likes green tea", category: "general", created_at: expect.stringMatching(/Z$/) });
    expect(found.map((m) => m.content)).not.toContain("Lives in Berlin");
    expect(events.at(-1).type).toBe("run_completed");
  });

  it("finds nothing among another user's memories", async () => {
    const tenant = await createTenant(prisma);
    await seed(tenant, "owner", ["Likes green tea"]);
    const run = await completedRun(tenant, { query: '[call:memory_search {"query":"tea"}]', context: { user_id: "stranger" } });
    expect(run.tool_calls[0].result).toEqual({ memories: [] });
  });
});

describe(`memories in the prompt, at most MEMORY_PROMPT_MAX_COUNT (${PROMPT_MAX_COUNT})`, () => {
  let tenant: Tenant;
  // Oldest first: the two relevant to tea are the oldest, so only relevance can bring them in.
  const many = ["Likes green tea", "Prefers tea without sugar", "Lives in Berlin", "Works as a nurse", "Has a dog named Rex", "Is learning Spanish"];
  beforeAll(async () => {
    tenant = await createTenant(prisma);
    await seed(tenant, "many", many);
    await seed(tenant, "few", ["Enjoys jazz", "Owns a cat"]);
  });

  it("puts the memories most relevant to the query first, then the newest, within the limit", async () => {
    const lines = promptMemories(await systemPrompt(tenant, "many", "Which tea should I brew?"));
    expect(lines).toHaveLength(PROMPT_MAX_COUNT);
    expect(new Set(lines.slice(0, 2))).toEqual(new Set(["(general) Likes green tea", "(general) Prefers tea without sugar"]));
    expect(lines[2]).toBe("(general) Is learning Spanish");
  });

  it("falls back to the newest memories when none is relevant", async () => {
    const lines = promptMemories(await systemPrompt(tenant, "many", "good morning"));
    expect(lines).toEqual(["(general) Is learning Spanish", "(general) Has a dog named Rex", "(general) Works as a nurse"]);
  });

  it("gives a user with fewer memories than the limit all of them", async () => {
    const prompt = await systemPrompt(tenant, "few", "Which tea should I brew?");
    expect(prompt.startsWith(MEMORY_HEADER)).toBe(true);
    expect(new Set(promptMemories(prompt))).toEqual(new Set(["(general) Enjoys jazz", "(general) Owns a cat"]));
  });
});
