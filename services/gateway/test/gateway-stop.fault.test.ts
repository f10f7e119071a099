import { createTenant, createWidgetKey, eventually, startStackOnPrivatePostgres, type PrivatePostgresStack, type Tenant } from "@agentrun/testing";

jest.setTimeout(120_000);

// A gateway stopped (SIGTERM) during a rolling deploy, on a PostgreSQL cluster of the test's own
// that it freezes: a run being recorded when the stop comes is still queued and answered.
let own: PrivatePostgresStack;
let tenant: Tenant;

beforeAll(async () => {
  own = await startStackOnPrivatePostgres({ memory: false, env: { DB_QUERY_TIMEOUT_MS: "8000" } });
  tenant = await createTenant(own.prisma, { plan: "enterprise", rpmLimit: 100_000 });
}, 120_000);

afterAll(async () => {
  await own?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** POSTs `body` as JSON: the answer's status, Connection and CORS origin headers and text, or status 0 and the client's error. */
function post(url: string, headers: Record<string, string>, body: object, signal?: AbortSignal) {
  return fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body), signal }).then(
    async (res) => ({ status: res.status, connection: res.headers.get("connection"), cors: res.headers.get("access-control-allow-origin"), text: await res.text() }),
    (err: Error & { cause?: { code?: string } }) => ({ status: 0, connection: null, cors: null, text: `client error: ${err.cause?.code ?? err.message}` }),
  );
}

/**
 * Has the gateway at `url` look the test's key and agent up afresh, quickly: the run's request
 * right after finds them in its cache (AUTH_CACHE_TTL_MS, 900 ms from the lookup's start) and
 * reaches the run's statement, rather than waiting for the frozen database in authentication
 * (where the stop cuts it after its grace, as a request that started no run). A lookup that took
 * long, as a new process's first one does on a busy machine, is made again once it has lapsed.
 */
async function freshKeyLookup(url: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await sleep(1000);
    const started = Date.now();
    expect((await fetch(`${url}/api/tasks?limit=1`, { headers: tenant.headers })).status).toBe(200);
    if (Date.now() - started < 300 || attempt === 9) return;
  }
}

it.each([
  ["a stream", true],
  ["a JSON request", false],
])("queues and answers a run whose recording outlasts the stop's grace (%s), then exits 0", async (_what, stream) => {
  const { proc, url } = await own.stack.addGateway();
  await freshKeyLookup(url);
  const exited = new Promise<number | null>((resolve) => proc.child.once("exit", (code) => resolve(code)));
  const query = `recorded while stopping (${stream ? "stream" : "json"})`;

  own.pg.freeze();
  const answer = post(`${url}/api/run`, tenant.headers, { query, stream });
  await sleep(300);
  proc.child.kill("SIGTERM");
  // Past SHUTDOWN_STREAM_GRACE_MS (2 s): the run's statement is still waiting for PostgreSQL.
  await sleep(2600);
  own.pg.thaw();

  const got = await answer;
  const run = await eventually(async () => {
    const r = await own.prisma.run.findFirst({ where: { orgId: tenant.orgId, query }, select: { id: true, taskId: true, status: true, output: true } });
    return r?.status === "completed" ? r : undefined;
  }, { timeoutMs: 30_000 });
  expect(run).toMatchObject({ status: "completed", output: `Echo: ${query}` });
  // The caller learnt its run: a stream its run_started (then an end, to re-attach elsewhere), a
  // JSON request 202 with the run's ids; either way the connection closes with the answer.
  expect({ status: got.status, connection: got.connection }).toEqual({ status: stream ? 200 : 202, connection: "close" });
  if (stream) {
    const events = got.text.split("\n").flatMap((l) => (l.startsWith("data: ") ? [JSON.parse(l.slice(6)) as { type: string; run_id: string }] : []));
    expect(events[0]).toMatchObject({ seq: 1, type: "run_started", run_id: run!.id, task_id: run!.taskId });
  } else {
    expect(JSON.parse(got.text)).toMatchObject({ run_id: run!.id, task_id: run!.taskId, status: expect.stringMatching(/^(queued|running)$/) });
  }
  expect(await exited).toBe(0);
  expect(proc.output()).not.toMatch(/could not enqueue run/);
});

it("answers 503 a request still authenticating at the cut, and it starts no run afterwards", async () => {
  // A key this gateway has never looked up: its lookup waits for the frozen database.
  const stranger = await createTenant(own.prisma, { plan: "enterprise", rpmLimit: 100_000 });
  // At info, so that its log shows the stop's answer (and would show an error after it). A grace
  // of 1 s: the stop answers before a lookup that needs a new connection gives up on the frozen
  // database (2 s), which would answer 503 by itself.
  const { proc, url } = await own.stack.addGateway({ LOG_LEVEL: "info", SHUTDOWN_STREAM_GRACE_MS: "1000" });
  const exited = new Promise<number | null>((resolve) => proc.child.once("exit", (code) => resolve(code)));
  const query = "sent while the key is looked up";

  const origin = "https://shop.example";
  const widgetKey = await createWidgetKey(own.prisma, stranger.agentId, [origin]);
  // Connections in the gateway's pool, so that the lookups below wait for answers, not for connections.
  const warm = await Promise.all(Array.from({ length: 4 }, () => fetch(`${url}/api/tasks?limit=1`, { headers: tenant.headers }).then((r) => r.status)));
  expect(warm).toEqual([200, 200, 200, 200]);

  own.pg.freeze();
  // Answered at the grace's end, while PostgreSQL is still frozen.
  const signal = AbortSignal.timeout(6000);
  const answer = post(`${url}/api/run`, stranger.headers, { query }, signal);
  // The widget's key lookup waits as well; its answer is readable by the page (CORS), as an outage's.
  const widgetAnswer = post(`${url}/api/v1/widget/run`, { "x-widget-key": widgetKey, origin }, { query }, signal);
  await sleep(300);
  proc.child.kill("SIGTERM");
  const got = (await Promise.all([answer, widgetAnswer])).map(({ text, ...rest }) => ({ ...rest, body: text.startsWith("client error") ? text : (JSON.parse(text) as unknown) }));
  own.pg.thaw();
  const shuttingDown = { status: 503, connection: "close", body: { error: { code: "unavailable", message: "Shutting down: retry the request." } } };
  expect(got).toEqual([
    { ...shuttingDown, cors: null },
    { ...shuttingDown, cors: origin },
  ]);

  expect(await exited).toBe(0);
  // The lookup ended after the answer (once PostgreSQL returned, or with the process): nothing was recorded.
  expect(await own.prisma.run.count({ where: { orgId: stranger.orgId } })).toBe(0);
  expect(await own.prisma.task.count({ where: { orgId: stranger.orgId } })).toBe(0);
  expect(proc.output()).toMatch(/answered 503 to requests that had not begun to act/);
  expect(proc.output()).not.toMatch(/request failed/);
});
