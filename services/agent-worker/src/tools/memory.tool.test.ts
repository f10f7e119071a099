import { randomUUID } from "node:crypto";
import { MEMORY_CONTENT_MAX_CHARS } from "@agentrun/contracts";
import { createMemoryClient, type MemoryClient } from "@agentrun/memory-client";
import { startMemoryService, type MemoryService } from "@agentrun/testing";
import { ToolRegistry } from "./registry";
import type { ToolContext } from "./tool";

// The real memory service, on the test database: what a call saved is read back from it.
let memoryService: MemoryService;
let memory: MemoryClient;

beforeAll(async () => {
  memoryService = await startMemoryService();
  memory = createMemoryClient({ baseUrl: memoryService.url, token: memoryService.token, timeoutMs: 5000 });
});

afterAll(async () => {
  await memoryService?.stop();
});

// Each test its own organization and agent: what it finds stored is its own.
let scope: { org_id: string; agent_id: string };
beforeEach(() => {
  scope = { org_id: `org_test_${randomUUID()}`, agent_id: `agt_test_${randomUUID()}` };
});
const stored = async () => (await memory.list({ ...scope, user_id: "u1" })).memories.map((m) => m.content);

const registry = new ToolRegistry({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false });
const ctx = (): ToolContext => ({
  orgId: scope.org_id,
  runId: "run_test",
  agentId: scope.agent_id,
  userId: "u1",
  httpAllowlist: [],
  memory,
  signal: new AbortController().signal,
});
const save = (args: object) => registry.call("memory_save", JSON.stringify(args), ["memory"], ctx());

describe("memory_save", () => {
  it.each([
    ["blank content", "  "],
    ["whitespace and line breaks only", " \n\t "],
    ["empty content", ""],
  ])("answers invalid_arguments for %s and stores nothing", async (_name, content) => {
    const outcome = await save({ content });
    expect(outcome).toMatchObject({ tool: "memory", action: "save", ok: false, result: { error: { code: "invalid_arguments" } } });
    expect(await stored()).toEqual([]);
  });

  it("saves content of the maximum length surrounded by whitespace, trimmed, as POST /api/memory does", async () => {
    const content = "x".repeat(MEMORY_CONTENT_MAX_CHARS);
    const outcome = await save({ content: `  ${content}\n` });
    expect(outcome).toMatchObject({ ok: true, result: { saved: true, memory_id: expect.stringMatching(/^mem_/), duplicate: false } });
    expect(await stored()).toEqual([content]);
  });

  it("still refuses content over the maximum length once trimmed", async () => {
    const outcome = await save({ content: ` ${"x".repeat(MEMORY_CONTENT_MAX_CHARS + 1)} ` });
    expect(outcome).toMatchObject({ ok: false, result: { error: { code: "invalid_arguments" } } });
    expect(await stored()).toEqual([]);
  });
});
