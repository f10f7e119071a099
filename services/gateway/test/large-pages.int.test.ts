import { randomBytes } from "node:crypto";
import { stackWithTenant, apiJson, type Stack, type Tenant } from "@agentrun/testing";
import { newId, type PrismaClient } from "@agentrun/db";
import { RUNS_PER_PAGE_MAX } from "../src/views/list-queries";

// Pages of GET /api/messages, GET /api/tasks/{id}/runs and GET /api/tasks/{id} whose rows are
// megabytes each: they end at their byte budget, with has_more, rather than being built whole.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { memory: false } });

const api = (method: string, path: string, body?: unknown) => apiJson(stack.gatewayUrl, method, path, tenant.headers, body);
const run = (query: string) => api("POST", "/run", { query, stream: false });

describe("messages of many megabytes", () => {
  it("end a page past 8 MB (PAGE_MAX_BYTES), with has_more, and the next page goes on from there", async () => {
    const taskId = (await run("a task with large results")).body.task_id;
    // Three tool results of 5 MB each (of random text, which PostgreSQL cannot compress), after
    // the task's two messages.
    const at = Date.now() + 1000;
    for (let i = 0; i < 3; i++) {
      const big = randomBytes(3.75 * 1024 * 1024).toString("base64");
      await prisma.message.create({ data: { id: newId("msg"), taskId, role: "tool", content: JSON.stringify({ text: big }), tool: "http", action: "get", params: { url: `https://example.com/${i}` }, result: { text: big }, createdAt: new Date(at + i) } });
    }
    const first = await api("GET", `/messages?task_id=${taskId}`);
    expect(first.status).toBe(200);
    // Each is 10 MB as stored (its content and its result): the page ends after the newest.
    expect(first.body.messages.map((m: any) => m.params.url)).toEqual(["https://example.com/2"]);
    expect(first.body.has_more).toBe(true);
    const second = await api("GET", `/messages?task_id=${taskId}&before=${first.body.messages[0].message_id}`);
    expect(second.body.messages.map((m: any) => m.params?.url ?? m.role)).toEqual(["https://example.com/1"]);
    expect(second.body.has_more).toBe(true);
    const third = await api("GET", `/messages?task_id=${taskId}&before=${second.body.messages[0].message_id}`);
    expect(third.body.messages.map((m: any) => m.params?.url ?? m.role)).toEqual(["https://example.com/0"]);
    expect(third.body.has_more).toBe(true);
    const rest = await api("GET", `/messages?task_id=${taskId}&before=${third.body.messages[0].message_id}`);
    expect(rest.body.messages.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    expect(rest.body.has_more).toBe(false);
  }, 60_000);
});

describe("runs of many megabytes", () => {
  /** A task of one run, then three completed runs whose `field` holds 5 MB each (random text, which PostgreSQL cannot compress). */
  async function taskWithLargeRuns(field: "query" | "output") {
    const first = (await run(`a task with a long ${field} in its runs`)).body;
    const task = await prisma.task.findUniqueOrThrow({ where: { id: first.task_id } });
    const at = Date.now() + 1000;
    const big: string[] = [];
    for (let i = 0; i < 3; i++) {
      const data = { query: `q${i}`, [field]: randomBytes(3.75 * 1024 * 1024).toString("base64") };
      big.push((await prisma.run.create({ data: { id: newId("run"), taskId: task.id, orgId: task.orgId, agentId: task.agentId, status: "completed", ...data, createdAt: new Date(at + i) } })).id);
    }
    return { first, task, big };
  }

  it("are listed in pages past 8 MB of queries and outputs, or of `limit` runs, with has_more; `after` goes on", async () => {
    const { first, task, big } = await taskWithLargeRuns("output");
    const list = async (query = "") => {
      const res = await api("GET", `/tasks/${task.id}/runs${query}`);
      expect(res.status).toBe(200);
      return { ids: res.body.runs.map((r: any) => r.run_id), has_more: res.body.has_more, outputs: res.body.runs.map((r: any) => r.output.length) };
    };
    // The page ends once its queries and outputs pass 8 MB: after the second large run.
    const page = await list();
    expect({ ids: page.ids, has_more: page.has_more }).toEqual({ ids: [first.run_id, big[0], big[1]], has_more: true });
    expect(page.outputs.slice(1)).toEqual([5 * 1024 * 1024, 5 * 1024 * 1024]);
    expect(await list(`?after=${big[1]}`)).toMatchObject({ ids: [big[2]], has_more: false });
    // By count.
    expect(await list("?limit=1")).toMatchObject({ ids: [first.run_id], has_more: true });
    expect(await list(`?limit=1&after=${big[1]}`)).toMatchObject({ ids: [big[2]], has_more: false });
    // The task's own run summaries (queries only) are all there: 8 MB of queries is far off.
    expect((await api("GET", `/tasks/${task.id}`)).body.runs.map((r: any) => r.run_id)).toEqual([first.run_id, ...big]);
    // A cursor of another task, or out of range limits: 400.
    const other = (await run("another task")).body;
    for (const query of [`?after=${other.run_id}`, "?after=run_nope", "?limit=0", "?limit=1001", "?limit=x", "?page=2"]) {
      expect([query, (await api("GET", `/tasks/${task.id}/runs${query}`)).status]).toEqual([query, 400]);
    }
  }, 60_000);

  it("show in the task's run summaries as far as 8 MB of queries; run_count tells there are more", async () => {
    const { first, task, big: ids } = await taskWithLargeRuns("query");
    await prisma.task.update({ where: { id: task.id }, data: { runCount: 4 } });
    const detail = (await api("GET", `/tasks/${task.id}`)).body;
    expect(detail.runs.map((r: any) => r.run_id)).toEqual([first.run_id, ids[0], ids[1]]);
    expect(detail.run_count).toBe(4);
  }, 60_000);
});

describe("a task of many short runs", () => {
  it("is listed at most RUNS_PER_PAGE_MAX runs a page, with has_more, and its summaries stop there too", async () => {
    const first = (await run("a task of many runs")).body;
    const task = await prisma.task.findUniqueOrThrow({ where: { id: first.task_id } });
    const MANY = RUNS_PER_PAGE_MAX + 100;
    // Each run counts RUN_OVERHEAD_BYTES more than its query and output (empty here, so that the
    // page ends at the count alone).
    await prisma.$executeRaw`
      INSERT INTO runs (id, task_id, org_id, agent_id, status, query, output, created_at)
      SELECT 'run_many_' || ${task.id} || '_' || g, ${task.id}, ${task.orgId}, ${task.agentId}, 'completed', '', '', now() + g * interval '1 millisecond'
      FROM generate_series(1, ${MANY}::integer) g`;
    await prisma.task.update({ where: { id: task.id }, data: { runCount: MANY + 1 } });

    const page = await api("GET", `/tasks/${task.id}/runs`);
    expect(page.status).toBe(200);
    expect(page.body.runs).toHaveLength(RUNS_PER_PAGE_MAX);
    expect(page.body.has_more).toBe(true);
    expect(page.body.runs[0].run_id).toBe(first.run_id);
    const rest = await api("GET", `/tasks/${task.id}/runs?after=${page.body.runs.at(-1).run_id}`);
    expect(rest.body.runs).toHaveLength(MANY + 1 - RUNS_PER_PAGE_MAX);
    expect(rest.body.runs.at(-1).run_id).toBe(`run_many_${task.id}_${MANY}`);
    expect(rest.body.has_more).toBe(false);
    // A page of `limit` runs is unchanged by the cap.
    const limited = (await api("GET", `/tasks/${task.id}/runs?limit=1000`)).body;
    expect([limited.runs.length, limited.has_more]).toEqual([1000, true]);

    const detail = (await api("GET", `/tasks/${task.id}`)).body;
    expect(detail.runs).toHaveLength(RUNS_PER_PAGE_MAX);
    expect(detail.run_count).toBe(MANY + 1);
  }, 120_000);
});
