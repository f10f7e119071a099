import { stackWithTenant, apiJson, createTenant, rawExchange, rawHead, readSse, watchSse, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { runLogKey } from "@agentrun/events";
import type IORedis from "ioredis";

// Replaying and following a run's events: GET /api/tasks/{id}/runs/{run_id}/events.

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let redis: IORedis;

stackWithTenant((started) => ({ stack, prisma, tenant, redis } = started as typeof started & { redis: IORedis }), { stack: { memory: false }, redis: true });

const api = (method: string, path: string, body?: unknown, t: Tenant = tenant, headers: Record<string, string> = {}) => apiJson(stack.gatewayUrl, method, path, { ...t.headers, ...headers }, body);
const run = (query: string, extra: object = {}, t: Tenant = tenant) => api("POST", "/run", { query, stream: false, ...extra }, t);

describe("run events", () => {
  it("replays a finished run as SSE and as JSON, and resumes after a seq", async () => {
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:5] replay me" }, headers: tenant.headers });
    const { run_id, task_id } = live.events[0]!.data;
    const url = `${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`;
    const sse = await readSse(url, { headers: tenant.headers });
    expect(sse.events.map((e) => e.data)).toEqual(live.events.map((e) => e.data));
    expect(sse.events.map((e) => e.id)).toEqual(live.events.map((e) => e.id));
    const json = await api("GET", `/tasks/${task_id}/runs/${run_id}/events`, undefined, tenant, { accept: "application/json" });
    expect(json.body.events).toEqual(live.events.map((e) => e.data));
    const after = await readSse(`${url}?after=4`, { headers: tenant.headers });
    expect(after.events.map((e) => Number(e.id))).toEqual([5, 6, 7]);
    const fromHeader = await readSse(`${url}?after=1`, { headers: { ...tenant.headers, "last-event-id": "6" } });
    expect(fromHeader.events.map((e) => Number(e.id))).toEqual([7]);
    expect((await api("GET", `/tasks/${task_id}/runs/${run_id}/events?after=-1`)).status).toBe(400);
    // Beyond any seq (seqs are 32-bit integers in the store): refused, never a 500.
    for (const accept of ["application/json", "text/event-stream"]) {
      const res = await api("GET", `/tasks/${task_id}/runs/${run_id}/events`, undefined, tenant, { accept, "last-event-id": "3000000000" });
      expect(res).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
    }
  });

  it("answers JSON or SSE by Accept, honouring q-values and media parameters; SSE for a wildcard or no Accept", async () => {
    const { body } = await run("[chunks:2] negotiate");
    const url = `${stack.gatewayUrl}/api/tasks/${body.task_id}/runs/${body.run_id}/events`;
    const typeFor = async (accept?: string) => {
      const res = await fetch(url, { headers: { ...tenant.headers, ...(accept === undefined ? {} : { accept }) } });
      await res.text();
      // Either answer depends on Accept, which a cache must know.
      expect([accept, res.headers.get("vary")]).toEqual([accept, expect.stringMatching(/\bAccept\b/)]);
      return res.headers.get("content-type")?.split(";")[0];
    };
    const cases: [string | undefined, string][] = [
      ["application/json", "application/json"],
      ["application/json; charset=utf-8", "application/json"],
      ["Application/JSON", "application/json"],
      ["text/event-stream;q=0.5, application/json", "application/json"],
      ["application/json, text/plain, */*", "application/json"],
      ["application/*", "application/json"],
      ["text/event-stream", "text/event-stream"],
      ["application/json;q=0.5, text/event-stream", "text/event-stream"],
      ["*/*", "text/event-stream"],
      ["text/html", "text/event-stream"],
      [undefined, "text/event-stream"],
      // Parameters other than q are left out: the media types and q-values decide.
      ["application/json; version=1", "application/json"],
      ["Application/JSON; Version=1, text/event-stream;q=0.5", "application/json"],
      ["application/json; version=1, */*;q=0.1", "application/json"],
      ["application/json;version=1, text/event-stream;q=0.1", "application/json"],
      ["text/event-stream; version=1", "text/event-stream"],
      ["text/html, application/json; profile=x;q=0.9", "application/json"],
      ["application/json; version=1;q=0.4, text/event-stream; version=2;q=0.6", "text/event-stream"],
      ["*/*, application/json", "application/json"],
    ];
    for (const [accept, type] of cases) expect([accept, await typeFor(accept)]).toEqual([accept, type]);
  });

  it("answers 204 to a re-attach after a finished run's terminal event, so that EventSource stops reconnecting", async () => {
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:3] done" }, headers: tenant.headers });
    const { run_id, task_id } = live.events[0]!.data;
    const url = `${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`;
    const res = await fetch(url, { headers: { ...tenant.headers, accept: "text/event-stream", "last-event-id": live.events.at(-1)!.id! } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const before = await readSse(`${url}?after=${Number(live.events.at(-1)!.id) - 1}`, { headers: tenant.headers });
    expect(before.events.map((e) => e.data.type)).toEqual(["run_completed"]);
  });

  it("sends the terminal event to a re-attach past a finished run's end (a client holding events the store lost), then 204", async () => {
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:3] done" }, headers: tenant.headers });
    const { run_id, task_id } = live.events[0]!.data;
    const url = `${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`;
    const past = await readSse(url, { headers: { ...tenant.headers, "last-event-id": "500" } });
    expect(past.status).toBe(200);
    expect(past.events).toEqual([live.events.at(-1)]);
    // EventSource resumes after it: the end.
    const again = await fetch(url, { headers: { ...tenant.headers, accept: "text/event-stream", "last-event-id": past.events[0]!.id! } });
    expect(again.status).toBe(204);
    // The JSON answer says the same: the terminal event past the end, nothing at it.
    const json = (cursor: string) => fetch(url, { headers: { ...tenant.headers, accept: "application/json", "last-event-id": cursor } }).then(async (r) => [r.status, await r.json()]);
    expect(await json("500")).toEqual([200, { events: [live.events.at(-1)!.data] }]);
    expect(await json(past.events[0]!.id!)).toEqual([200, { events: [] }]);
  });

  it("never replays an event its run's log got after the run's end (from a worker frozen past the log's fence)", async () => {
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:3] ended before a late append" }, headers: tenant.headers });
    const { run_id, task_id } = live.events[0]!.data;
    const end = Number(live.events.at(-1)!.id);
    await redis.rpush(runLogKey(stack.env.REDIS_PREFIX!, run_id), JSON.stringify({ seq: end + 1, type: "text_chunk", run_id, content: "late" }));
    const url = `${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`;
    expect((await readSse(url, { headers: tenant.headers })).events.map((e) => e.data)).toEqual(live.events.map((e) => e.data));
    const at = (cursor: number, accept: string) => fetch(url, { headers: { ...tenant.headers, accept, "last-event-id": String(cursor) } }).then(async (r) => [r.status, await r.text()]);
    expect(await at(end, "text/event-stream")).toEqual([204, ""]);
    expect(await at(end, "application/json")).toEqual([200, JSON.stringify({ events: [] })]);
    expect(JSON.parse((await at(end - 1, "application/json"))[1] as string)).toEqual({ events: [live.events.at(-1)!.data] });
    expect(JSON.parse((await at(end + 5, "application/json"))[1] as string)).toEqual({ events: [live.events.at(-1)!.data] });
  });

  it("names the cursor's range when Last-Event-ID is too large", async () => {
    const res = await api("GET", "/tasks/task_nope/runs/run_nope/events", undefined, tenant, { "last-event-id": "1000000001" });
    expect(res).toMatchObject({ status: 400, body: { error: { code: "invalid_request", message: expect.stringContaining("from 0 to 1000000000") } } });
  });

  it("checks the resume cursor before the task and run: a malformed one is 400 whatever the ids", async () => {
    const other = await createTenant(prisma);
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: "mine" }, headers: other.headers });
    const { run_id, task_id } = live.events[0]!.data;
    for (const path of ["/tasks/task_nope/runs/run_nope/events", `/tasks/${task_id}/runs/run_nope/events`, `/tasks/${task_id}/runs/${run_id}/events`]) {
      expect(await api("GET", `${path}?after=abc`)).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
      const res = await api("GET", path, undefined, tenant, { "last-event-id": "x" });
      expect(res).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
    }
  });

  it("ends a stream whose Last-Event-ID is past a running run's last event with the run's terminal event", async () => {
    const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:100][chunks:8] ahead" }, headers: tenant.headers });
    await live.waitFor((e) => e.type === "run_started");
    const { run_id, task_id } = live.events[0];
    const ahead = readSse(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`, { headers: { ...tenant.headers, "last-event-id": "500" }, timeoutMs: 15_000 });
    expect((await live.result).events.at(-1)!.data.type).toBe("run_completed");
    const res = await ahead;
    expect(res.status).toBe(200);
    expect(res.events.map((e) => e.data.type)).toEqual(["run_completed"]);
  });

  it("lets a client that disconnected mid-run re-attach with Last-Event-ID and get every event exactly once", async () => {
    const first = await readSse(`${stack.gatewayUrl}/api/run`, {
      body: { query: "[sleep:80][chunks:25] reattach" },
      headers: tenant.headers,
      until: (_e, all) => all.length >= 6,
    });
    const { run_id, task_id } = first.events[0]!.data;
    const rest = await readSse(`${stack.gatewayUrl}/api/tasks/${task_id}/runs/${run_id}/events`, { headers: { ...tenant.headers, "last-event-id": first.events.at(-1)!.id! } });
    const seqs = [...first.events, ...rest.events].map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(rest.events.at(-1)!.data.type).toBe("run_completed");
    const text = [...first.events, ...rest.events].filter((e) => e.data.type === "text_chunk").map((e) => e.data.content).join("");
    expect(text).toBe("Echo: reattach");
  });

  it("answers HEAD on a run in progress with the stream's status and headers, at once, while the run goes on", async () => {
    // About 20 s of run (40 chunks of a text long enough to make them): far longer than the HEAD may take.
    const query = `[sleep:500][chunks:40] headed ${"x".repeat(60)}`;
    const live = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query }, headers: tenant.headers, until: (e) => e.data.type === "run_started" });
    const { run_id, task_id } = live.events[0]!.data;
    const path = `/api/tasks/${task_id}/runs/${run_id}/events`;
    // A request pipelined after the HEAD on its connection is answered only once the HEAD's answer has ended.
    const answer = await rawExchange(stack.gatewayUrl, rawHead("HEAD", path, tenant.headers) + rawHead("GET", "/healthz", { connection: "close" }), { timeoutMs: 8000 });
    const [head, next] = answer.split(/\r\n\r\n(?=HTTP\/)/);
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head).toMatch(/\r\ncontent-type: text\/event-stream; charset=utf-8/i);
    expect(head).toMatch(/\r\ncache-control: no-cache, no-transform/i);
    expect(next).toMatch(/^HTTP\/1\.1 200 /);
    expect((await prisma.run.findUniqueOrThrow({ where: { id: run_id } })).status).toMatch(/^(queued|running)$/);
    expect((await api("POST", `/tasks/${task_id}/runs/${run_id}/cancel`)).status).toBe(202);
  });
});
