import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { MEMORY_CONTENT_MAX_CHARS } from "@agentrun/contracts";
import { createMemoryClient } from "@agentrun/memory-client";
import { ToolRegistry } from "./registry";
import type { ToolContext } from "./tool";

/** What the memory service was asked: one body per create. */
const created: Array<Record<string, unknown>> = [];
let server: Server;
let memoryUrl: string;

beforeAll(async () => {
  // A real HTTP server in the memory service's place, answering every create in the contract's shape.
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const input = JSON.parse(body) as Record<string, unknown>;
      created.push(input);
      const memory = { memory_id: "mem_1", content: input.content, category: input.category ?? "general", user_id: input.user_id, created_at: "2026-01-01T00:00:00.000Z" };
      res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ memory, created: true }));
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  memoryUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  created.length = 0;
});

const registry = new ToolRegistry({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false });
const ctx = (): ToolContext => ({
  orgId: "org_test",
  runId: "run_test",
  agentId: "agt_test",
  userId: "u1",
  httpAllowlist: [],
  memory: createMemoryClient({ baseUrl: memoryUrl, token: "t", timeoutMs: 2000 }),
  signal: new AbortController().signal,
});
const save = (args: object) => registry.call("memory_save", JSON.stringify(args), ["memory"], ctx());

describe("memory_save", () => {
  it.each([
    ["blank content", "  "],
    ["whitespace and line breaks only", " \n\t "],
    ["empty content", ""],
  ])("answers invalid_arguments for %s without calling the memory service", async (_name, content) => {
    const outcome = await save({ content });
    expect(outcome).toMatchObject({ tool: "memory", action: "save", ok: false, result: { error: { code: "invalid_arguments" } } });
    expect(created).toEqual([]);
  });

  it("saves content of the maximum length surrounded by whitespace, trimmed, as POST /api/memory does", async () => {
    const content = "x".repeat(MEMORY_CONTENT_MAX_CHARS);
    const outcome = await save({ content: `  ${content}\n` });
    expect(outcome).toMatchObject({ ok: true, result: { saved: true, memory_id: "mem_1", duplicate: false } });
    expect(created).toEqual([{ org_id: "org_test", agent_id: "agt_test", user_id: "u1", content }]);
  });

  it("still refuses content over the maximum length once trimmed", async () => {
    const outcome = await save({ content: ` ${"x".repeat(MEMORY_CONTENT_MAX_CHARS + 1)} ` });
    expect(outcome).toMatchObject({ ok: false, result: { error: { code: "invalid_arguments" } } });
    expect(created).toEqual([]);
  });
});
