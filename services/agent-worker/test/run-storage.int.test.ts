import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { stackWithTenant, createTenant, readSse, type Stack, type Tenant } from "@agentrun/testing";
import { newId, type PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, workerEnv: { HTTP_TOOL_ALLOW_PRIVATE: "true" } }, tenant: { credits: 100 } });

const run = (query: string) => readSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: tenant.headers });

/**
 * For the enclosing describe block: a row trigger (`event`, e.g. "BEFORE INSERT ON messages")
 * that raises an error, as PostgreSQL would refuse a value, on the rows matching `condition`.
 */
function refusedWhile(event: string, condition: string): void {
  const name = `test_refuse_${newId("run").slice(4).toLowerCase()}`;
  const table = event.split(" ON ")[1]!;
  beforeAll(async () => {
    await prisma.$executeRawUnsafe(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF ${condition} THEN RAISE EXCEPTION 'refused by the test'; END IF;
        RETURN NEW;
      END $$`);
    await prisma.$executeRawUnsafe(`CREATE TRIGGER ${name} ${event} FOR EACH ROW EXECUTE FUNCTION ${name}()`);
  });
  afterAll(async () => {
    await prisma.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${name} ON ${table}`);
    await prisma.$executeRawUnsafe(`DROP FUNCTION IF EXISTS ${name}()`);
  });
}

describe("a run whose end PostgreSQL refuses", () => {
  const marker = `refuse_${newId("run").slice(4).toLowerCase()}`;
  // Refuses assistant messages holding the marker: the worker's first attempt to end the run
  // fails with an error that is not an outage.
  refusedWhile("BEFORE INSERT ON messages", `NEW.role = 'assistant' AND NEW.content LIKE '%${marker}%'`);

  it("ends failed with every event stored once, in order, the terminal one right after the last, and credits refunded", async () => {
    const before = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
    const res = await run(`${marker} [chunks:3]`);
    const events = res.events.map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(["run_started", "text_chunk", "text_chunk", "text_chunk", "run_failed"]);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(events.at(-1)!.error).toEqual({ code: "internal_error", message: "The run's result could not be stored." });

    const runId = events[0]!.run_id as string;
    expect(await readDbEvents({ prisma }, runId)).toEqual(events);
    const stored = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
    expect(stored).toMatchObject({ status: "failed", errorCode: "internal_error", output: "", creditsUsed: 0 });
    expect(stored.task).toMatchObject({ status: "failed", activeRunId: null });
    const messages = await prisma.message.findMany({ where: { runId } });
    expect(messages.map((m) => [m.role, m.content])).toEqual([["user", `${marker} [chunks:3]`]]);
    const after = await prisma.organization.findUniqueOrThrow({ where: { id: tenant.orgId } });
    expect(after.creditBalance).toBe(before.creditBalance);
  });
});

/** 12 KB of JSON nested 6,000 levels deep: parsed, it would overflow the stack of storing and sending it. */
const DEEP_JSON = "[".repeat(6000) + "]".repeat(6000);

describe("a run whose tool fetched U+0000 or a lone surrogate, or JSON nested thousands of levels deep", () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    // Text with NUL bytes (declared as text, so the tool returns it): PostgreSQL stores no
    // U+0000 in text or jsonb. JSON with a lone surrogate's escape: jsonb refuses it.
    server = createServer((req, res) => {
      if (req.url === "/deep") return void res.writeHead(200, { "content-type": "application/json" }).end(DEEP_JSON);
      if (req.url === "/json") return void res.writeHead(200, { "content-type": "application/json" }).end('{"x":"\\ud800","y":["\\udfff"]}');
      res.writeHead(200, { "content-type": "text/plain" }).end(Buffer.from([0x61, 0x00, 0x62, 0x00]));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/bin`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it("completes, with U+FFFD in its place in the stream, the stored events and the history", async () => {
    const fetcher = await createTenant(prisma, { tools: ["http"], httpAllowlist: ["127.0.0.1"] });
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[call:http_get {"url":"${url}"}]` }, headers: fetcher.headers });
    const events = res.events.map((e) => e.data);
    expect(events.at(-1)!.type).toBe("run_completed");
    const result = events.find((e) => e.type === "tool_result")!;
    expect(result.result).toMatchObject({ status: 200, body: "a\uFFFDb\uFFFD" });

    const runId = events[0]!.run_id as string;
    expect(await readDbEvents({ prisma }, runId)).toEqual(events);
    const tool = await prisma.message.findFirstOrThrow({ where: { runId, role: "tool" } });
    expect(tool.result).toMatchObject({ body: "a\uFFFDb\uFFFD" });
  });

  it("completes with U+FFFD for lone surrogates in a fetched JSON body and in the model's tool arguments", async () => {
    const fetcher = await createTenant(prisma, { tools: ["http", "calc"], httpAllowlist: ["127.0.0.1"] });
    const query = `[call:http_get {"url":"${url.replace("/bin", "/json")}"}] [call:calc_evaluate {"expression":"\\ud800"}]`;
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: fetcher.headers, timeoutMs: 15_000 });
    const events = res.events.map((e) => e.data);
    expect(events.at(-1)!.type).toBe("run_completed");
    const results = events.filter((e) => e.type === "tool_result");
    expect(results[0]!.result).toMatchObject({ status: 200, body: { x: "\uFFFD", y: ["\uFFFD"] } });
    expect(events.find((e) => e.type === "tool_call" && e.tool === "calc")!.params).toEqual({ expression: "\uFFFD" });

    const runId = events[0]!.run_id as string;
    expect(await readDbEvents({ prisma }, runId)).toEqual(events);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed" });
  });

  it("completes with the deeply nested page as text in its tool_result, every seq in order", async () => {
    const fetcher = await createTenant(prisma, { tools: ["http"], httpAllowlist: ["127.0.0.1"] });
    const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[call:http_get {"url":"${url.replace("/bin", "/deep")}"}]` }, headers: fetcher.headers });
    const events = res.events.map((e) => e.data);
    expect(events.map((e) => e.seq)).toEqual(events.map((_e, i) => i + 1));
    expect(events.filter((e) => e.type !== "text_chunk").map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "run_completed"]);
    expect(events.find((e) => e.type === "tool_result")!.result).toEqual({ status: 200, content_type: "application/json", body: DEEP_JSON, truncated: false });

    const runId = events[0]!.run_id as string;
    expect(await readDbEvents({ prisma }, runId)).toEqual(events);
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed" });
  });
});

describe("a run whose job fails on every attempt", () => {
  const marker = `unclaimable_${newId("run").slice(4).toLowerCase()}`;
  // The claim (queued → running) of runs holding the marker fails: each attempt throws.
  refusedWhile("BEFORE UPDATE ON runs", `NEW.status = 'running' AND NEW.query LIKE '%${marker}%'`);

  it("ends failed once the attempts are used up, keeping the user's query in the task's history", async () => {
    const res = await run(`${marker} please`);
    const events = res.events.map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(["run_started", "run_failed"]);
    expect(events[1]!.error).toMatchObject({ code: "internal_error" });
    const runId = events[0]!.run_id as string;
    expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "failed", creditsUsed: 0 });
    const messages = await prisma.message.findMany({ where: { runId } });
    expect(messages.map((m) => [m.role, m.content])).toEqual([["user", `${marker} please`]]);
  });
});
