import { stackWithTenant, runJson, createTenant, rawExchange, rawHead, readSse, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, workerEnv: { HISTORY_MAX_CHARS: "100" } }, tenant: { instructions: "You help {{user_name}} (id {{user_id}}) on plan {{metadata.plan}}.{{metadata.missing}}" } });

const run = (body: object, headers: Record<string, string> = tenant.headers) => readSse(`${stack.gatewayUrl}/api/run`, { body, headers });
const runOnce = (body: Record<string, unknown>) => runJson(stack.gatewayUrl, tenant.headers, { ...body, stream: false });

describe("POST /api/run streaming", () => {
  it("streams run_started, the text in chunks and run_completed, framed with consecutive ids", async () => {
    const res = await run({ query: "hello there [chunks:4]" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("cache-control")).toBe("no-cache, no-transform");
    // The ping interval (SSE_HEARTBEAT_MS, 14 s by default), for clients that watch for a silent stream.
    expect(res.headers.get("x-heartbeat-interval-ms")).toBe("14000");
    const types = res.events.map((e) => e.data.type);
    expect(types).toEqual(["run_started", "text_chunk", "text_chunk", "text_chunk", "text_chunk", "run_completed"]);
    expect(res.events.map((e) => Number(e.id))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(res.events.map((e) => e.data.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const [started] = res.events;
    expect(started!.data.run_id).toMatch(/^run_/);
    expect(started!.data.task_id).toMatch(/^task_/);
    const text = res.events.filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("");
    expect(text).toBe("Echo: hello there");
    const done = res.events.at(-1)!.data;
    expect(done.run_id).toBe(started!.data.run_id);
    expect(done.credits_used).toBeGreaterThanOrEqual(1);
    expect(done.duration_ms).toBeGreaterThanOrEqual(0);

    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: started!.data.run_id }, include: { task: true } });
    expect(dbRun.status).toBe("completed");
    expect(dbRun.output).toBe("Echo: hello there");
    expect(dbRun.creditsUsed).toBe(done.credits_used);
    // The run's time from its claim to its end, as stored. completed_at is the end's transaction
    // time, and the duration is read later in that transaction (timestamps in whole milliseconds).
    expect(done.duration_ms).toBe(dbRun.durationMs);
    const claimToEnd = dbRun.completedAt!.getTime() - dbRun.startedAt!.getTime();
    expect(dbRun.durationMs).toBeGreaterThanOrEqual(claimToEnd - 2);
    expect(dbRun.durationMs).toBeLessThan(claimToEnd + 1000);
    expect(dbRun.task.status).toBe("completed");
    expect(dbRun.task.runCount).toBe(1);
    expect(dbRun.task.creditsUsed).toBe(done.credits_used);
    expect(dbRun.task.activeRunId).toBeNull();
    expect(await readDbEvents({ prisma }, dbRun.id)).toEqual(res.events.map((e) => e.data));
    // run_started stored when the run was accepted, the rest with the terminal event.
    const batches = await prisma.runEventBatch.findMany({ where: { runId: dbRun.id }, orderBy: { firstSeq: "asc" } });
    expect(batches.map((b) => [b.firstSeq, b.lastSeq])).toEqual([[1, 1], [2, 6]]);
  });

  it("reports tool calls with tool, action and params, each followed by its result", async () => {
    const res = await run({ query: 'Compute [call:calc_evaluate {"expression":"2+3*4"}] [call:clock_now {}]' });
    const events = res.events.map((e) => e.data);
    expect(events.map((e) => e.type)).toEqual(["run_started", "tool_call", "tool_result", "tool_call", "tool_result", ...events.slice(5, -1).map(() => "text_chunk"), "run_completed"]);
    expect(events[1]).toMatchObject({ type: "tool_call", tool: "calc", action: "evaluate", params: { expression: "2+3*4" } });
    expect(events[2]).toMatchObject({ type: "tool_result", tool: "calc", result: { expression: "2+3*4", result: 14 } });
    expect(events[3]).toMatchObject({ type: "tool_call", tool: "clock", action: "now" });
    expect(typeof events[4].result.iso).toBe("string");
    const text = events.filter((e) => e.type === "text_chunk").map((e) => e.content).join("");
    expect(text).toContain('Tool calc_evaluate returned: {"expression":"2+3*4","result":14}');
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: events[0].run_id } });
    // 1 base + 2 tool calls + ceil(tokens / 1000)
    expect(dbRun.toolCallCount).toBe(2);
    expect(dbRun.creditsUsed).toBe(3 + Math.ceil((dbRun.promptTokens + dbRun.completionTokens) / 1000));
    expect(events.at(-1).credits_used).toBe(dbRun.creditsUsed);
  });

  it("sends a tool call's arguments that are not JSON back to the model as {}, which strict providers require", async () => {
    // The scripted model refuses (400) a conversation carrying arguments that are not JSON.
    const res = await run({ query: "[call:calc_evaluate {oops}]" });
    const events = res.events.map((e) => e.data);
    expect(events[1]).toMatchObject({ type: "tool_call", tool: "calc", params: { arguments: "{oops}" } });
    expect(events[2]).toMatchObject({ type: "tool_result", result: { error: { code: "invalid_arguments" } } });
    expect(events.at(-1).type).toBe("run_completed");
    const text = events.filter((e) => e.type === "text_chunk").map((e) => e.content).join("");
    expect(text).toMatch(/^Tool calc_evaluate returned: \{"error":\{"code":"invalid_arguments"/);
    const stored = await prisma.message.findFirstOrThrow({ where: { runId: events[0].run_id, role: "tool" } });
    expect(stored.params).toEqual({ arguments: "{oops}" });
  });

  it("turns a tool error into a result the model sees, and the run completes", async () => {
    const res = await run({ query: '[call:calc_evaluate {"expression":"2+"}]' });
    const events = res.events.map((e) => e.data);
    expect(events[2]).toMatchObject({ type: "tool_result", result: { error: { code: "invalid_expression" } } });
    expect(events.at(-1).type).toBe("run_completed");
  });

  it("fills the instructions template from the run context", async () => {
    const res = await runOnce({ query: "[echo-system]", context: { user_id: "u-42", user_name: "Ada", metadata: { plan: "gold" } } });
    expect(res.status).toBe(200);
    expect(res.body.output).toBe("You help Ada (id u-42) on plan gold.");
  });

  it("fills it from the task's user_id and metadata where the run context has none", async () => {
    const task = await fetch(`${stack.gatewayUrl}/api/tasks`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: JSON.stringify({ user_id: "u-7", metadata: { plan: "silver", missing: "!" } }) });
    const { task_id } = (await task.json()) as { task_id: string };
    const plain = await runOnce({ query: "[echo-system]", task_id });
    expect(plain.body.output).toBe("You help  (id u-7) on plan silver.!");
    const given = await runOnce({ query: "[echo-system]", task_id, context: { user_name: "Bo", metadata: { plan: "gold" } } });
    expect(given.body.output).toBe("You help Bo (id u-7) on plan gold.!");
  });

  it("continues a task with its history", async () => {
    const first = await runOnce({ query: "first question" });
    const second = await runOnce({ query: "second question", task_id: first.body.task_id });
    const third = await runOnce({ query: "[history]", task_id: first.body.task_id });
    expect(second.body.task_id).toBe(first.body.task_id);
    expect(third.body.output).toBe("first question | second question");
    const task = await prisma.task.findUniqueOrThrow({ where: { id: first.body.task_id } });
    expect(task.runCount).toBe(3);
    expect(task.creditsUsed).toBe(first.body.credits_used + second.body.credits_used + third.body.credits_used);
    expect(task.title).toBe("first question");
    // The history so far: 14 + 20 + 15 + 21 + 9 + 32 = 111 characters, over HISTORY_MAX_CHARS
    // (100): the oldest message is left out.
    const fourth = await runOnce({ query: "[history]", task_id: first.body.task_id });
    expect(fourth.body.output).toBe("second question | [history]");
  });
});

describe("POST /api/run with stream: false", () => {
  it("answers the Run object with tool_calls", async () => {
    const res = await runOnce({ query: '[call:calc_evaluate {"expression":"6*7"}]' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: "completed",
      query: '[call:calc_evaluate {"expression":"6*7"}]',
      output: 'Tool calc_evaluate returned: {"expression":"6*7","result":42}',
      tool_calls: [{ tool: "calc", action: "evaluate", params: { expression: "6*7" }, result: { expression: "6*7", result: 42 } }],
    });
    expect(res.body.run_id).toMatch(/^run_/);
    expect(res.body.completed_at).toMatch(/Z$/);
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: res.body.run_id } });
    expect(res.body.duration_ms).toBe(dbRun.durationMs);
    // A calculation in a process of its own takes some time.
    expect(res.body.duration_ms).toBeGreaterThan(0);
  });

  it("answers 200 with status failed and the error when the model fails", async () => {
    const res = await runOnce({ query: "[error:500]" });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("failed");
    expect(res.body.error.code).toBe("model_error");
    expect(res.body.error.message).toMatch(/500/);
    expect(res.body.credits_used).toBe(0);
  });
});

describe("failure paths", () => {
  it("ends the stream with run_failed when the model answers an error", async () => {
    const res = await run({ query: "[error:429]" });
    const types = res.events.map((e) => e.data.type);
    expect(types).toEqual(["run_started", "run_failed"]);
    expect(res.events[1]!.data.error.code).toBe("model_rate_limited");
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: res.events[0]!.data.run_id }, include: { task: true } });
    expect(dbRun.status).toBe("failed");
    expect(dbRun.errorCode).toBe("model_rate_limited");
    expect(dbRun.task.status).toBe("failed");
  });

  it("ends with run_failed model_bad_response on a malformed stream, keeping the text streamed before it", async () => {
    // The scripted model sends its first chunk and the truncated line in one write.
    const res = await run({ query: "[malformed] some text" });
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "text_chunk", "run_failed"]);
    const streamed: string = res.events[1]!.data.content;
    expect(streamed.length).toBeGreaterThan(0);
    expect("Echo: some text".startsWith(streamed)).toBe(true);
    expect(res.events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "model_bad_response" } });
    const { run_id, task_id } = res.events[0]!.data;
    const replay = await readSse(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`, { headers: tenant.headers });
    expect(replay.events.map((e) => e.data)).toEqual(res.events.map((e) => e.data));
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: run_id }, include: { task: true } });
    expect([dbRun.status, dbRun.errorCode, dbRun.task.activeRunId]).toEqual(["failed", "model_bad_response", null]);
  });

  it("fails with model_bad_response, free and without an answer in the history, when the stream ends mid-answer", async () => {
    const res = await run({ query: "[cut][chunks:3] never finished" });
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", "text_chunk", "run_failed"]);
    expect(res.events.at(-1)!.data).toMatchObject({ type: "run_failed", error: { code: "model_bad_response" } });
    const { run_id, task_id } = res.events[0]!.data;
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: run_id } });
    expect([dbRun.status, dbRun.output, dbRun.creditsUsed]).toEqual(["failed", "", 0]);
    const messages = await prisma.message.findMany({ where: { taskId: task_id } });
    expect(messages.map((m) => m.role)).toEqual(["user"]);
  });

  it("keeps no output and no answer in the history of a run that failed after streaming text", async () => {
    // One model call allowed: it says something, then asks for a tool, and the run fails there.
    const limited = await createTenant(prisma, { maxSteps: 1 });
    const res = await run({ query: "[preface][call:clock_now] Half an answer." }, limited.headers);
    expect(res.events.map((e) => e.data.type)).toEqual(["run_started", ...Array(4).fill("text_chunk"), "run_failed"]);
    expect(res.events.at(-1)!.data.error.code).toBe("max_steps_exceeded");
    const { run_id, task_id } = res.events[0]!.data;
    expect((await prisma.run.findUniqueOrThrow({ where: { id: run_id } })).output).toBe("");
    const messages = await prisma.message.findMany({ where: { taskId: task_id }, orderBy: { createdAt: "asc" } });
    expect(messages.map((m) => m.role)).toEqual(["user"]);
  });

  it("keeps running when the client disconnects, and the run completes", async () => {
    const res = await run({ query: "[sleep:100][chunks:8] keep going" }, tenant.headers);
    expect(res.events.at(-1)!.data.type).toBe("run_completed");
    const partial = await readSse(`${stack.gatewayUrl}/api/run`, {
      body: { query: "[sleep:100][chunks:8] keep going after disconnect" },
      headers: tenant.headers,
      until: (e) => e.data.type === "text_chunk",
    });
    const runId = partial.events[0]!.data.run_id;
    expect(partial.events.map((e) => e.data.type)).toEqual(["run_started", "text_chunk"]);
    const deadline = Date.now() + 15_000;
    let status = "";
    while (Date.now() < deadline) {
      status = (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status;
      if (status === "completed") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe("completed");
    const dbRun = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
    expect(dbRun.output).toBe("Echo: keep going after disconnect");
  });
});

describe("HEAD of a run's events", () => {
  it("answers the headers a GET would start with at once, without following the run", async () => {
    const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:200][chunks:10] slow" }, headers: tenant.headers });
    await w.waitFor((e) => e.type === "run_started");
    const { run_id, task_id } = w.events[0];
    const url = `${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`;
    const live = await fetch(url, { method: "HEAD", headers: tenant.headers, signal: AbortSignal.timeout(1000) });
    expect([live.status, live.headers.get("content-type"), live.headers.get("x-heartbeat-interval-ms")]).toEqual([200, "text/event-stream; charset=utf-8", "14000"]);
    // The HEAD is over: the connection serves the next request at once (were the gateway still
    // following the run on it, this would wait for the run's end).
    for (let i = 0; i < 3; i++) expect((await fetch(url, { method: "HEAD", headers: tenant.headers, signal: AbortSignal.timeout(1000) })).status).toBe(200);
    expect((await fetch(`${stack.gatewayUrl}/api/tasks/${task_id}`, { headers: tenant.headers, signal: AbortSignal.timeout(1000) })).status).toBe(200);
    const done = await w.result;
    const last = done.events.at(-1)!.data;
    expect(last.type).toBe("run_completed");
    const ended = await fetch(url, { method: "HEAD", headers: { ...tenant.headers, "last-event-id": String(last.seq) }, signal: AbortSignal.timeout(1000) });
    expect(ended.status).toBe(204);
  });
});

describe("connections", () => {
  it("closes the connection after the stream when the client asked for Connection: close", async () => {
    const text = JSON.stringify({ query: "bye [chunks:2]" });
    const head = rawHead("POST", "/api/run", { ...tenant.headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), connection: "close" });
    // Resolves once the gateway has closed the connection.
    const got = await rawExchange(stack.gatewayUrl, head + text);
    expect(got).toMatch(/\r\nconnection: close\r\n/i);
    expect(got).toContain('"type":"run_completed"');
  });
});
