import { stackWithTenant, apiJson, createTenant, readSse, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import { newId, type PrismaClient } from "@agentrun/db";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { memory: false } });

const api = (method: string, path: string, body?: unknown, t: Tenant = tenant, headers: Record<string, string> = {}) => apiJson(stack.gatewayUrl, method, path, { ...t.headers, ...headers }, body);
const run = (query: string, extra: object = {}, t: Tenant = tenant) => api("POST", "/run", { query, stream: false, ...extra }, t);

describe("tasks", () => {
  it("lists the agent's tasks newest first with total, limit, offset and status", async () => {
    const t = await createTenant(prisma);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await run(`task ${i}`, {}, t)).body.task_id);
    await run("[error:500] failing", {}, t);
    const all = await api("GET", "/tasks", undefined, t);
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(6);
    expect(all.body.tasks.slice(1).map((x: any) => x.task_id)).toEqual([...ids].reverse());
    expect(all.body.tasks[1]).toMatchObject({ title: "task 4", status: "completed", run_count: 1 });
    expect(all.body.tasks[1].credits_used).toBeGreaterThan(0);
    const page = await api("GET", "/tasks?limit=2&offset=2", undefined, t);
    expect(page.body.tasks.map((x: any) => x.task_id)).toEqual([ids[3], ids[2]]);
    expect(page.body.total).toBe(6);
    // An offset past every row, however large, is an empty page.
    const past = await api("GET", "/tasks?offset=99999999999999999999", undefined, t);
    expect([past.status, past.body.tasks, past.body.total]).toEqual([200, [], 6]);
    const failed = await api("GET", "/tasks?status=failed", undefined, t);
    expect(failed.body.total).toBe(1);
    expect(failed.body.tasks[0].status).toBe("failed");
    for (const q of ["limit=0", "limit=101", "limit=abc", "offset=-1", "offset=1.5", "status=done"]) {
      const bad = await api("GET", `/tasks?${q}`, undefined, t);
      expect([q, bad.status, bad.body.error.code]).toEqual([q, 400, "invalid_request"]);
    }
  });

  it("answers lists without an ETag, and If-None-Match: * never turns them into an empty 304", async () => {
    const first = await fetch(`${stack.gatewayUrl}/api/tasks?limit=1`, { headers: tenant.headers });
    expect(first.status).toBe(200);
    expect(first.headers.get("etag")).toBeNull();
    const body = await first.text();
    const again = await fetch(`${stack.gatewayUrl}/api/tasks?limit=1`, { headers: { ...tenant.headers, "if-none-match": "*", "cache-control": "max-age=0" } });
    expect(again.status).toBe(200);
    expect(await again.text()).toBe(body);
  });

  it("creates a task, runs on it, and returns it with run summaries and runs", async () => {
    const created = await api("POST", "/tasks", { title: "Support case", user_id: "u-1", metadata: { plan: "pro" } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ title: "Support case", status: "pending", run_count: 0, credits_used: 0, user_id: "u-1", metadata: { plan: "pro" } });
    const id = created.body.task_id;
    const r1 = await run("one", { task_id: id });
    const r2 = await run("[error:500]", { task_id: id });
    const task = await api("GET", `/tasks/${id}`);
    expect(task.body).toMatchObject({ task_id: id, status: "failed", run_count: 2, credits_used: r1.body.credits_used + r2.body.credits_used });
    expect(task.body.runs.map((r: any) => [r.run_id, r.status])).toEqual([
      [r1.body.run_id, "completed"],
      [r2.body.run_id, "failed"],
    ]);
    const runs = await api("GET", `/tasks/${id}/runs`);
    expect(runs.body.runs.map((r: any) => r.run_id)).toEqual([r1.body.run_id, r2.body.run_id]);
    expect(runs.body.runs[1].error.code).toBe("model_error");
    expect(runs.body.has_more).toBe(false);
    // Each run alone, as listed.
    for (const listed of runs.body.runs) expect((await api("GET", `/tasks/${id}/runs/${listed.run_id}`)).body).toEqual(listed);
    // Each run summary exactly, with the task's keys first and `runs` last.
    const rows = await prisma.run.findMany({ where: { taskId: id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
    const summary = (r: (typeof rows)[number]) => ({ run_id: r.id, status: r.status, query: r.query, credits_used: r.creditsUsed, duration_ms: r.durationMs, created_at: r.createdAt.toISOString() });
    expect(JSON.stringify(task.body.runs)).toBe(JSON.stringify(rows.map(summary)));
    expect(Object.keys(task.body)).toEqual(["task_id", "title", "status", "created_at", "updated_at", "run_count", "credits_used", "user_id", "metadata", "runs"]);
    const sums = await prisma.run.aggregate({ where: { taskId: id }, _sum: { creditsUsed: true }, _count: true });
    expect(task.body.credits_used).toBe(sums._sum.creditsUsed);
    expect(task.body.run_count).toBe(sums._count);
    expect((await api("POST", "/tasks", { title: "" })).status).toBe(400);
    expect((await api("POST", "/tasks", { nope: 1 })).status).toBe(400);
  });

  it("refuses an Idempotency-Key on POST /tasks, naming it, rather than create a task per retry", async () => {
    const t = await createTenant(prisma);
    for (let i = 0; i < 2; i++) {
      const res = await api("POST", "/tasks", { title: "once" }, t, { "idempotency-key": "k-1" });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", details: [{ path: "Idempotency-Key", message: expect.stringMatching(/only POST \/api\/run/) }] });
    }
    expect(await prisma.task.count({ where: { orgId: t.orgId } })).toBe(0);
  });

  it("titles a task created without a title with its first run's query, cut to 80 characters", async () => {
    const created = await api("POST", "/tasks", {});
    expect(created).toMatchObject({ status: 201, body: { title: "", run_count: 0 } });
    const query = `${"é".repeat(79)}xyz`;
    expect((await run(query, { task_id: created.body.task_id })).status).toBe(200);
    expect((await run("second", { task_id: created.body.task_id })).status).toBe(200);
    expect((await api("GET", `/tasks/${created.body.task_id}`)).body).toMatchObject({ title: `${"é".repeat(79)}x`, run_count: 2 });
    // A given title stays.
    const titled = await api("POST", "/tasks", { title: "Mine" });
    await run("other", { task_id: titled.body.task_id });
    expect((await api("GET", `/tasks/${titled.body.task_id}`)).body.title).toBe("Mine");
  });

  it("lists each task exactly as GET /tasks/{id} shows it, keys in the same order", async () => {
    const t = await createTenant(prisma);
    const bodies = [{ title: "plain" }, { title: "with user", user_id: "u-9" }, { title: "with metadata", metadata: { tier: "gold", n: [1, 2] } }, { title: "both", user_id: "u-8", metadata: { a: { b: null } } }];
    for (const b of bodies) expect((await api("POST", "/tasks", b, t)).status).toBe(201);
    const list = await api("GET", "/tasks", undefined, t);
    expect(list.body.tasks).toHaveLength(bodies.length);
    for (const item of list.body.tasks) {
      const { runs: _runs, ...single } = (await api("GET", `/tasks/${item.task_id}`, undefined, t)).body;
      expect(JSON.stringify(item)).toBe(JSON.stringify(single));
    }
    expect(list.body.tasks.map((x: any) => Object.keys(x).filter((k) => k === "user_id" || k === "metadata"))).toEqual([["user_id", "metadata"], ["metadata"], ["user_id"], []]);
  });

  it("lists and counts only the key's agent's tasks, not those of another agent of the same organization", async () => {
    const t = await createTenant(prisma);
    const otherAgent = newId("agt");
    await prisma.agent.create({ data: { id: otherAgent, orgId: t.orgId, name: "second agent", model: "scripted", instructions: "", tools: [], maxSteps: 8, httpAllowlist: [] } });
    const other: Tenant = { ...t, agentId: otherAgent, headers: { ...t.headers, "x-agent-id": otherAgent } };
    const mine = (await api("POST", "/tasks", { title: "mine" }, t)).body.task_id;
    for (const title of ["theirs 1", "theirs 2"]) expect((await api("POST", "/tasks", { title }, other)).status).toBe(201);
    const list = await api("GET", "/tasks", undefined, t);
    expect([list.body.total, list.body.tasks.map((x: any) => x.task_id)]).toEqual([1, [mine]]);
    const theirs = await api("GET", "/tasks?status=pending", undefined, other);
    expect([theirs.body.total, theirs.body.tasks.map((x: any) => x.title)]).toEqual([2, ["theirs 2", "theirs 1"]]);
  });

  it("answers 404 for unknown ids and 403 for another organization's or agent's task", async () => {
    const { body } = await run("mine");
    const other = await createTenant(prisma);
    const sibling = { ...tenant, agentId: newId("agt") };
    await prisma.agent.create({ data: { id: sibling.agentId, orgId: tenant.orgId, name: "sibling", model: "scripted", tools: [] } });
    sibling.headers = { ...tenant.headers, "x-agent-id": sibling.agentId };
    for (const path of [`/tasks/${body.task_id}`, `/tasks/${body.task_id}/runs`, `/tasks/${body.task_id}/runs/${body.run_id}`, `/messages?task_id=${body.task_id}`, `/tasks/${body.task_id}/runs/${body.run_id}/events`]) {
      expect((await api("GET", path, undefined, other)).body.error.code).toBe("forbidden");
      expect((await api("GET", path, undefined, sibling)).status).toBe(403);
    }
    expect((await api("DELETE", `/tasks/${body.task_id}`, undefined, other)).status).toBe(403);
    expect((await api("GET", "/tasks/task_unknown")).body.error.code).toBe("task_not_found");
    expect((await api("GET", `/tasks/${body.task_id}/runs/run_unknown/events`)).body.error.code).toBe("run_not_found");
    expect((await api("GET", `/tasks/${body.task_id}/runs/run_unknown`)).body.error.code).toBe("run_not_found");
    expect((await api("POST", `/tasks/${body.task_id}/runs/run_unknown/cancel`)).status).toBe(404);
    expect((await run("x", { task_id: "task_unknown" })).body.error.code).toBe("task_not_found");
  });

  it("deletes a task with a run in progress: the run is cancelled, then everything is 404", async () => {
    const w = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:200][chunks:30] long" }, headers: tenant.headers });
    await w.waitFor((e) => e.type === "text_chunk");
    const { run_id: runId, task_id: taskId } = w.events[0];
    const del = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}`, { method: "DELETE", headers: tenant.headers });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    const res = await w.result;
    expect(res.events.at(-1)!.data.type).toBe("run_cancelled");
    for (const path of [`/tasks/${taskId}`, `/tasks/${taskId}/runs`, `/tasks/${taskId}/runs/${runId}`, `/messages?task_id=${taskId}`, `/tasks/${taskId}/runs/${runId}/events`]) {
      expect((await api("GET", path)).status).toBe(404);
    }
    expect(await prisma.run.count({ where: { taskId } })).toBe(0);
    expect(await prisma.runEventBatch.count({ where: { runId } })).toBe(0);
    expect(await prisma.message.count({ where: { taskId } })).toBe(0);
  });

  it("deletes a task on which runs start while the delete waits: each is stopped or refused, never left without an end", async () => {
    const busy = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000 });
    const first = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:30] first" }, headers: busy.headers });
    await first.waitFor((e) => e.type === "text_chunk");
    const { task_id: taskId } = first.events[0];
    let answered = false;
    const del = fetch(`${stack.gatewayUrl}/api/tasks/${taskId}`, { method: "DELETE", headers: busy.headers }).then((r) => ((answered = true), r));
    // Runs on the task from several clients, each trying again while a run holds the task (409)
    // until the delete has answered: one starts the moment the task is free, before the delete
    // goes on.
    const attempt = async () => {
      for (;;) {
        const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:30] second", task_id: taskId }, headers: busy.headers, timeoutMs: 20_000 });
        if (res.status !== 409 || answered) return res;
      }
    };
    const others = await Promise.all(Array.from({ length: 6 }, attempt));
    const { status } = await del;
    // Deleted, or (runs kept starting) refused as run_in_progress and left as it was.
    expect([204, 409]).toContain(status);
    for (const res of others) {
      if (res.status === 200) expect(["run_cancelled", "run_completed"]).toContain(res.events.at(-1)!.data.type);
      else expect([404, 409]).toContain(res.status);
    }
    const started = others.filter((r) => r.status === 200).map((r) => r.events[0]!.data.run_id as string);
    if (status === 204) {
      expect(await prisma.task.count({ where: { id: taskId } })).toBe(0);
      expect(await prisma.run.count({ where: { taskId } })).toBe(0);
    } else {
      expect(await prisma.run.count({ where: { id: { in: started }, status: { in: ["queued", "running"] } } })).toBe(0);
    }
  });
});

describe("messages", () => {
  it("pages a task's history backwards with before and has_more, tool calls as tool messages", async () => {
    const first = await run('[call:calc_evaluate {"expression":"1+1"}]');
    const taskId = first.body.task_id;
    await run("second", { task_id: taskId });
    const all = await api("GET", `/messages?task_id=${taskId}`);
    expect(all.body.has_more).toBe(false);
    expect(all.body.messages.map((m: any) => m.role)).toEqual(["user", "tool", "assistant", "user", "assistant"]);
    expect(all.body.messages[1]).toMatchObject({ tool: "calc", action: "evaluate", params: { expression: "1+1" }, result: { result: 2 } });
    const last2 = await api("GET", `/messages?task_id=${taskId}&limit=2`);
    expect(last2.body.messages.map((m: any) => m.content)).toEqual(["second", "Echo: second"]);
    expect(last2.body.has_more).toBe(true);
    const before = await api("GET", `/messages?task_id=${taskId}&limit=2&before=${last2.body.messages[0].message_id}`);
    expect(before.body.messages.map((m: any) => m.role)).toEqual(["tool", "assistant"]);
    expect(before.body.has_more).toBe(true);
    const rest = await api("GET", `/messages?task_id=${taskId}&limit=2&before=${before.body.messages[0].message_id}`);
    expect(rest.body.messages.map((m: any) => m.role)).toEqual(["user"]);
    expect(rest.body.has_more).toBe(false);
    expect((await api("GET", "/messages")).status).toBe(400);
    expect((await api("GET", `/messages?task_id=${taskId}&limit=201`)).status).toBe(400);
    expect((await api("GET", `/messages?task_id=${taskId}&before=msg_nope`)).status).toBe(400);
  });
});

describe("the user's message", () => {
  it("is in the history, stamped when asked, while the run is in progress; stored once", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:150][chunks:4] slow question" }, headers: tenant.headers });
    await live.waitFor((e) => e.type === "run_started");
    const taskId = live.events[0].task_id;
    const during = (await api("GET", `/messages?task_id=${taskId}`)).body.messages;
    expect(during.map((m: any) => [m.role, m.content])).toEqual([["user", "[sleep:150][chunks:4] slow question"]]);
    // Stamped in the transaction that accepted the run.
    const [runView] = (await api("GET", `/tasks/${taskId}/runs`)).body.runs;
    expect(during[0].created_at).toBe(runView.created_at);
    expect((await live.result).events.at(-1)?.data.type).toBe("run_completed");
    const after = (await api("GET", `/messages?task_id=${taskId}`)).body.messages;
    expect(after.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    expect(after[0]).toEqual(during[0]);
    expect(Date.parse(after[1].created_at) - Date.parse(after[0].created_at)).toBeGreaterThanOrEqual(500);
  });

  it("on a continued task, is stamped no earlier than its run as the run is stored (to the millisecond)", async () => {
    // The sub-millisecond part of the accept time is ≥ .5 for about half of the runs: the run's
    // time rounds up there, and the message must not be the millisecond before it.
    const first = await run("one");
    for (let i = 0; i < 20; i++) await run(`again ${i}`, { task_id: first.body.task_id });
    const runs = (await api("GET", `/tasks/${first.body.task_id}/runs`)).body.runs;
    const messages = (await api("GET", `/messages?task_id=${first.body.task_id}&limit=200`)).body.messages;
    const early = runs.filter((r: any) => Date.parse(messages.find((m: any) => m.run_id === r.run_id && m.role === "user").created_at) < Date.parse(r.created_at));
    expect(runs).toHaveLength(21);
    expect(early.map((r: any) => r.query)).toEqual([]);
  });

  it("comes first even when the run ends within milliseconds with many messages", async () => {
    const calls = Array.from({ length: 6 }, (_, i) => `[call:calc_evaluate {"expression":"${i}+1"}]`).join("");
    const first = await run(calls);
    const next = await run(calls, { task_id: first.body.task_id });
    const messages = (await api("GET", `/messages?task_id=${first.body.task_id}`)).body.messages;
    expect(messages.map((m: any) => m.role)).toEqual([...["user", ...Array(6).fill("tool"), "assistant"], ...["user", ...Array(6).fill("tool"), "assistant"]]);
    expect(messages.map((m: any) => m.run_id)).toEqual([...Array(8).fill(first.body.run_id), ...Array(8).fill(next.body.run_id)]);
    const times = messages.map((m: any) => Date.parse(m.created_at));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1]);
  });
});

describe("a model that speaks before calling tools", () => {
  it("keeps what it said before the tools as its own message, and gives the run its final text as output", async () => {
    const first = await run("[preface][call:clock_now] Let me look at the clock.");
    expect(first.body.status).toBe("completed");
    expect(first.body.output).toMatch(/^Tool clock_now returned: /);
    const taskId = first.body.task_id;
    const messages = (await api("GET", `/messages?task_id=${taskId}`)).body.messages;
    expect(messages.map((m: any) => [m.role, m.role === "tool" ? m.tool : m.content])).toEqual([
      ["user", "[preface][call:clock_now] Let me look at the clock."],
      ["assistant", "Let me look at the clock."],
      ["tool", "clock"],
      ["assistant", first.body.output],
    ]);
    // The stream carries both texts, in order around the tool events.
    const events = await api("GET", `/tasks/${taskId}/runs/${first.body.run_id}/events`, undefined, tenant, { accept: "application/json" });
    const kinds = events.body.events.map((e: any) => (e.type === "text_chunk" ? "text" : e.type));
    expect(kinds.filter((k: string, i: number) => k !== kinds[i - 1])).toEqual(["run_started", "text", "tool_call", "tool_result", "text", "run_completed"]);
  });
});
