import fc from "fast-check";
import { createTenant, eventually, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// Random bodies, headers, query strings and path segments at every endpoint: no answer is a 5xx,
// and every error is the contract's body. The tenant has credits and a limit high enough that
// neither masks anything; valid runs are real runs of queries the scripted model answers at once.
jest.setTimeout(300_000);

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let known: { taskId: string; runId: string };

beforeAll(async () => {
  stack = await startStack({ workers: 2, gatewayEnv: { AUTH_FAILURE_LIMIT: "100000" } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000, credits: 1_000_000 });
  const res = await fetch(`${stack.gatewayUrl}/api/run`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"query":"x","stream":false}' });
  const run = (await res.json()) as any;
  known = { taskId: run.task_id, runId: run.run_id };
  // The memory service's first answers (its connections, its first statements) may take longer
  // than the gateway waits for it on a loaded machine: a 503 that is right, but not what this test
  // is about. Warm it up until it answers.
  await eventually(async () => {
    const saved = await fetch(`${stack.gatewayUrl}/api/memory`, { method: "POST", headers: { ...tenant.headers, "content-type": "application/json" }, body: '{"user_id":"warm","content":"warm-up"}' });
    const listed = await fetch(`${stack.gatewayUrl}/api/memory?user_id=warm`, { headers: tenant.headers });
    return saved.status < 300 && listed.status === 200;
  });
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

/** Printable ASCII: anything else `fetch` refuses to put in a header. */
const headerText = (maxLength = 40) => fc.string({ unit: "grapheme-ascii", maxLength });

const pathSegment = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 30 }).map(encodeURIComponent) },
  fc.constantFrom("%", "%zz", "%E0%A4%A", "..", "%00", "a%2Fb", "x".repeat(300), "task_nope", "run_nope", "mem_nope"),
);
const taskId = fc.oneof(pathSegment, fc.constant("KNOWN_TASK"));
const runId = fc.oneof(pathSegment, fc.constant("KNOWN_RUN"));

const json = fc.jsonValue({ maxDepth: 4 });
/** Mostly a valid value (so that requests reach the handlers' deeper paths), sometimes anything. */
const mostly = <T>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<unknown> = json) => fc.oneof({ weight: 4, arbitrary: valid as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: other });
const shortText = fc.string({ minLength: 1, maxLength: 20 });

/** Null four times out of five. */
const rarely = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
/** Absent once in `freq` times (JSON.stringify drops undefined). */
const maybe = <T>(arb: fc.Arbitrary<T>, freq = 3) => fc.option(arb, { nil: undefined, freq });
/** Sometimes with a field the schema does not know. */
const withJunk = <T extends object>(arb: fc.Arbitrary<T>) =>
  fc.tuple(arb, rarely(fc.tuple(fc.string({ maxLength: 8 }), json))).map(([o, junk]) => (junk ? { ...o, [junk[0]]: junk[1] } : o));

const query = fc.oneof(fc.constant("x"), fc.string({ maxLength: 50 }), fc.constant(""), fc.constant("y".repeat(32_001)));
const context = withJunk(
  fc.record({ user_id: maybe(mostly(shortText)), user_name: maybe(mostly(fc.string({ maxLength: 20 }))), metadata: maybe(mostly(fc.dictionary(fc.string({ maxLength: 10 }), json, { maxKeys: 5 }))) }),
);
const runBody = mostly(
  withJunk(fc.record({ query: mostly(query), task_id: fc.option(mostly(fc.constant("KNOWN_TASK"), fc.oneof(taskId, json)), { nil: undefined, freq: 2 }), stream: maybe(mostly(fc.boolean())), context: maybe(mostly(context)) })),
);
const memoryBody = mostly(
  withJunk(fc.record({ content: mostly(fc.oneof(shortText, fc.constant("z".repeat(4001)))), category: maybe(mostly(fc.constantFrom("general", "fact", "preference", "instruction", "nope"))), user_id: mostly(shortText) })),
);
/** Well-formed run and memory bodies, so that real runs and entries happen between the malformed ones. */
const cleanRunBody = fc.record({
  query: fc.constantFrom("x", "hello", "[chunks:3] hi", '[call:calc_evaluate {"expression":"1+2"}]'),
  stream: maybe(fc.boolean()),
  task_id: fc.option(fc.constant("KNOWN_TASK"), { nil: undefined, freq: 2 }),
  context: maybe(fc.record({ user_id: maybe(shortText), user_name: maybe(fc.string({ maxLength: 20 })), metadata: maybe(fc.dictionary(fc.string({ maxLength: 10 }), json, { maxKeys: 5 })) })),
});
const cleanMemoryBody = fc.record({ content: shortText, user_id: shortText, category: maybe(fc.constantFrom("general", "fact", "preference", "instruction")) });
const taskBody = mostly(withJunk(fc.record({ title: maybe(mostly(fc.string({ minLength: 1, maxLength: 300 }))), user_id: maybe(mostly(shortText)), metadata: maybe(mostly(fc.dictionary(fc.string({ maxLength: 10 }), json, { maxKeys: 5 }))) })));

const anyQuery = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom("limit", "offset", "status", "user_id", "task_id", "before", "after"), fc.string({ maxLength: 10 })), fc.oneof(fc.string({ maxLength: 20 }), fc.integer().map(String), fc.constantFrom("", "pending", "KNOWN_TASK", "1e3", "-1", "99999999999999999999"))), { maxLength: 4 })
  .map((pairs) => new URLSearchParams(pairs).toString());
/** An endpoint's own parameters, mostly in range, or anything. */
const params = (own: Record<string, fc.Arbitrary<unknown>>) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record(own).map((p) => new URLSearchParams(Object.entries(p).filter((e): e is [string, string] => typeof e[1] === "string")).toString()) },
    { weight: 1, arbitrary: anyQuery },
  );
const intText = (max: number) => fc.oneof(fc.integer({ min: 0, max }).map(String), fc.constantFrom("-1", "abc", "1.5", String(max + 1)));

/** One request: an endpoint, a body (as JSON, raw text, or none) and extra headers. */
const request = fc.record({
  endpoint: fc.oneof(
    fc.record({ method: fc.constant("POST"), path: fc.constant("/api/run"), query: anyQuery, body: runBody }),
    fc.record({ method: fc.constant("POST"), path: fc.constant("/api/run"), query: fc.constant(""), body: cleanRunBody, clean: fc.constant(true) }),
    fc.record({ method: fc.constant("POST"), path: fc.constant("/api/memory"), query: fc.constant(""), body: cleanMemoryBody, clean: fc.constant(true) }),
    fc.record({ method: fc.constant("GET"), path: fc.constant("/api/tasks"), query: params({ limit: maybe(intText(100)), offset: maybe(intText(1000)), status: maybe(fc.constantFrom("pending", "running", "completed", "failed", "nope")) }) }),
    fc.record({ method: fc.constant("POST"), path: fc.constant("/api/tasks"), query: anyQuery, body: taskBody }),
    fc.record({ method: fc.constant("GET"), path: taskId.map((t) => `/api/tasks/${t}`), query: anyQuery }),
    // Deletes only tasks made during the run, so that KNOWN_TASK stays for the other requests.
    fc.record({ method: fc.constant("DELETE"), path: fc.oneof(pathSegment, fc.constant("RECENT_TASK")).map((t) => `/api/tasks/${t}`), query: anyQuery }),
    fc.record({ method: fc.constant("GET"), path: taskId.map((t) => `/api/tasks/${t}/runs`), query: anyQuery }),
    fc.record({ method: fc.constant("GET"), path: fc.tuple(taskId, runId).map(([t, r]) => `/api/tasks/${t}/runs/${r}`), query: anyQuery }),
    fc.record({ method: fc.constant("GET"), path: fc.tuple(taskId, runId).map(([t, r]) => `/api/tasks/${t}/runs/${r}/events`), query: params({ after: maybe(intText(20)) }) }),
    fc.record({ method: fc.constant("POST"), path: fc.tuple(taskId, runId).map(([t, r]) => `/api/tasks/${t}/runs/${r}/cancel`), query: anyQuery, body: json }),
    fc.record({ method: fc.constant("GET"), path: fc.constant("/api/messages"), query: params({ task_id: mostly(fc.constant("KNOWN_TASK"), pathSegment), limit: maybe(intText(200)), before: rarely(pathSegment) }) }),
    fc.record({ method: fc.constant("GET"), path: fc.constant("/api/memory"), query: params({ user_id: maybe(shortText), limit: maybe(intText(100)) }) }),
    fc.record({ method: fc.constant("POST"), path: fc.constant("/api/memory"), query: anyQuery, body: memoryBody }),
    fc.record({ method: fc.constant("DELETE"), path: pathSegment.map((m) => `/api/memory/${m}`), query: anyQuery }),
    fc.record({ method: fc.constantFrom("PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"), path: fc.constantFrom("/api/run", "/api/tasks", "/api/v1/memory", "/api/nope", "/healthz", "/api/openapi.json"), query: anyQuery }),
  ),
  v1: fc.boolean(),
  rawBody: rarely(fc.oneof(fc.string({ maxLength: 100 }), fc.constantFrom("{", "[1,", "null", '"str"', "{}".repeat(1000)))),
  contentType: mostly(fc.constantFrom("application/json", "application/json; charset=utf-8"), fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "", "garbage")) as fc.Arbitrary<string>,
  auth: fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, fc.record({ authorization: headerText(), "x-agent-id": headerText(120) }, { requiredKeys: [] })),
  headers: fc.record(
    {
      accept: fc.constantFrom("application/json", "text/event-stream", "*/*", "text/html"),
      "last-event-id": headerText(),
      "idempotency-key": headerText(300),
      "x-request-id": headerText(200),
    },
    { requiredKeys: [] },
  ),
});

let recentTask = "task_none";
const fill = (s: string) => s.replaceAll("KNOWN_TASK", known.taskId).replaceAll("KNOWN_RUN", known.runId).replaceAll("RECENT_TASK", recentTask);

it("answers every random request without a 5xx, every error in the contract's shape", async () => {
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const { method, path } = r.endpoint;
      const { query } = r.endpoint;
      const url = `${stack.gatewayUrl}${fill(r.v1 ? path.replace(/^\/api\//, "/api/v1/") : path)}${query ? `?${fill(query)}` : ""}`;
      const clean = "clean" in r.endpoint;
      const body = "body" in r.endpoint ? ((clean ? null : r.rawBody) ?? JSON.stringify(r.endpoint.body)) : undefined;
      const headers: Record<string, string> = { ...tenant.headers, ...(r.auth ?? {}), ...r.headers };
      const contentType = clean ? "application/json" : r.contentType;
      if (body !== undefined && contentType) headers["content-type"] = contentType;
      const res = await fetch(url, { method, headers, body: body === undefined ? undefined : fill(body), signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      const made = /"task_id":"(task_[0-9a-f]+)"/.exec(text)?.[1];
      if (res.ok && made && made !== known.taskId) recentTask = made;
      const context = `${method} ${url} → ${res.status} ${text.slice(0, 300)}`;

      expect({ context, status: res.status < 500 }).toEqual({ context, status: true });
      expect(res.headers.get("x-request-id")).toBeTruthy();
      if (res.status >= 400) {
        expect({ context, type: res.headers.get("content-type") }).toEqual({ context, type: expect.stringMatching(/^application\/json/) });
        if (method === "HEAD") return; // no body, by definition
        const parsed = JSON.parse(text);
        expect(parsed).toEqual({ error: expect.objectContaining({ code: expect.any(String), message: expect.any(String) }) });
        expect(Object.keys(parsed.error).filter((k) => !["code", "message", "details"].includes(k))).toEqual([]);
      } else if (res.status !== 204) {
        expect(res.headers.get("content-type")).toMatch(/^(application\/json|text\/event-stream)/);
      }
    }),
    { numRuns: 200 },
  );
});
