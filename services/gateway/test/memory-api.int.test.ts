import { randomUUID } from "node:crypto";
import { newId, type PrismaClient } from "@agentrun/db";
import { createTenant, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";

// The public memory API through the real gateway and memory service; no run needs a worker.
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
/** A second agent of `tenant`'s organization, reached with the same key. */
let sameOrgOtherAgent: Record<string, string>;
/** Another organization's key and agent. */
let otherOrg: Tenant;

beforeAll(async () => {
  // Outages are memory-outage's subject: here a slow machine's first calls must not time out.
  stack = await startStack({ workers: 0, gatewayEnv: { MEMORY_TIMEOUT_MS: "10000" } });
  prisma = testPrisma(testEnv().databaseUrl);
  [tenant, otherOrg] = await Promise.all([createTenant(prisma), createTenant(prisma)]);
  const agentId = newId("agt");
  await prisma.agent.create({ data: { id: agentId, orgId: tenant.orgId, name: "second agent", model: "scripted", instructions: "", tools: ["memory"], maxSteps: 8, httpAllowlist: [] } });
  sameOrgOtherAgent = { ...tenant.headers, "x-agent-id": agentId };
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

/** One request to the gateway; a non-string body is sent as JSON. */
async function call(method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; contentType?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? tenant.headers) };
  if (opts.body !== undefined) headers["content-type"] = opts.contentType ?? "application/json";
  const body = opts.body === undefined ? undefined : typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
  const res = await fetch(`${stack.gatewayUrl}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const create = (body: object, headers?: Record<string, string>) => call("POST", "/api/memory", { body, headers });
const list = (query = "", headers?: Record<string, string>) => call("GET", `/api/memory${query}`, { headers });
const remove = (id: string, headers?: Record<string, string>) => call("DELETE", `/api/memory/${id}`, { headers });
const user = () => `user-${randomUUID()}`;

/** Creates the memories one after another, so creation order is their age order; returns their ids. */
async function seed(userId: string, contents: string[], headers?: Record<string, string>): Promise<string[]> {
  const ids: string[] = [];
  for (const content of contents) {
    const res = await create({ content, user_id: userId }, headers);
    expect(res.status).toBe(201);
    ids.push(res.body.memory_id);
  }
  return ids;
}

describe("POST /api/memory", () => {
  it("creates an entry: 201 with exactly the entry's fields, category general by default", async () => {
    const userId = user();
    const res = await create({ content: "  Likes green tea  ", user_id: userId });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["category", "content", "created_at", "memory_id", "user_id"]);
    expect(res.body).toMatchObject({ content: "Likes green tea", category: "general", user_id: userId });
    expect(res.body.memory_id).toMatch(/^mem_/);
    expect(res.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it.each(["general", "preference", "fact", "instruction"])("accepts the category %s", async (category) => {
    const res = await create({ content: `A ${category} memory`, category, user_id: user() });
    expect(res.status).toBe(201);
    expect(res.body.category).toBe(category);
  });

  it("answers an exact duplicate (after trimming) with 201 and the existing entry", async () => {
    const userId = user();
    const first = await create({ content: "Works night shifts", category: "fact", user_id: userId });
    const again = await create({ content: " Works night shifts\n", category: "fact", user_id: userId });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect((await list(`?user_id=${userId}`)).body.memories).toHaveLength(1);
  });

  it("gives a duplicate with another category the latest category, on the one stored entry", async () => {
    const userId = user();
    const first = await create({ content: "Prefers email", category: "fact", user_id: userId });
    const again = await create({ content: "Prefers email", category: "preference", user_id: userId });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.body).toEqual({ ...first.body, category: "preference" });
    expect((await list(`?user_id=${userId}`)).body.memories).toEqual([again.body]);
    // Without a category, the duplicate keeps the stored one.
    const plain = await create({ content: "Prefers email", user_id: userId });
    expect(plain).toMatchObject({ status: 201, body: again.body });
  });

  it("stores the same content separately for another user and for another agent", async () => {
    const userId = user();
    const mine = await create({ content: "Speaks French", user_id: userId });
    const otherUser = await create({ content: "Speaks French", user_id: user() });
    const otherAgent = await create({ content: "Speaks French", user_id: userId }, sameOrgOtherAgent);
    expect([mine.status, otherUser.status, otherAgent.status]).toEqual([201, 201, 201]);
    expect(new Set([mine.body.memory_id, otherUser.body.memory_id, otherAgent.body.memory_id]).size).toBe(3);
  });

  it("accepts content of exactly 4,000 characters", async () => {
    const res = await create({ content: "x".repeat(4000), user_id: user() });
    expect(res.status).toBe(201);
    expect(res.body.content).toHaveLength(4000);
  });

  it.each([
    ["an unknown category", { content: "c", category: "secret", user_id: "u" }, "category"],
    ["content over 4,000 characters", { content: "x".repeat(4001), user_id: "u" }, "content"],
    ["blank content", { content: "   ", user_id: "u" }, "content"],
    ["missing content", { user_id: "u" }, "content"],
    ["content that is not a string", { content: 42, user_id: "u" }, "content"],
    ["a missing user_id", { content: "c" }, "user_id"],
    ["an empty user_id", { content: "c", user_id: "" }, "user_id"],
    ["an unknown field", { content: "c", user_id: "u", importance: 5 }, "importance"],
  ])("answers 400 invalid_request for %s", async (_name, body, field) => {
    const res = await create(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(typeof res.body.error.message).toBe("string");
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(field);
  });

  it("answers 400 for malformed JSON and 415 for a body that is not JSON", async () => {
    const malformed = await call("POST", "/api/memory", { body: '{"content":' });
    expect([malformed.status, malformed.body.error.code]).toEqual([400, "invalid_request"]);
    const text = await call("POST", "/api/memory", { body: "content=tea", contentType: "text/plain" });
    expect([text.status, text.body.error.code]).toEqual([415, "unsupported_media_type"]);
  });

  it("checks the key before the body, and the agent header", async () => {
    const noKey = await create({ content: "x".repeat(5000) }, { "x-agent-id": tenant.agentId });
    expect([noKey.status, noKey.body.error.code]).toEqual([401, "unauthorized"]);
    const noAgent = await create({ content: "c", user_id: "u" }, { authorization: tenant.headers.authorization! });
    expect([noAgent.status, noAgent.body.error.code]).toEqual([400, "invalid_request"]);
    const otherOrgsAgent = await create({ content: "c", user_id: "u" }, { ...tenant.headers, "x-agent-id": otherOrg.agentId });
    expect([otherOrgsAgent.status, otherOrgsAgent.body.error.code]).toEqual([403, "forbidden"]);
  });
});

describe("GET /api/memory", () => {
  it("lists one user's entries newest first, and every user's of the agent without user_id", async () => {
    const t = await createTenant(prisma);
    const [a, b] = [user(), user()];
    const aIds = await seed(a, ["a1", "a2", "a3"], t.headers);
    const bIds = await seed(b, ["b1"], t.headers);
    const ofA = await list(`?user_id=${a}`, t.headers);
    expect(ofA.status).toBe(200);
    expect(ofA.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([...aIds].reverse());
    expect(ofA.body.memories.map((m: { content: string }) => m.content)).toEqual(["a3", "a2", "a1"]);
    const all = await list("", t.headers);
    expect(all.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([...bIds, ...[...aIds].reverse()]);
    expect(Object.keys(all.body.memories[0]).sort()).toEqual(["category", "content", "created_at", "memory_id", "user_id"]);
  });

  it("returns 20 entries by default, and up to limit", async () => {
    const t = await createTenant(prisma);
    const u = user();
    const ids = await seed(u, Array.from({ length: 21 }, (_, i) => `memory ${i + 1}`), t.headers);
    const newestFirst = [...ids].reverse();
    expect((await list(`?user_id=${u}`, t.headers)).body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual(newestFirst.slice(0, 20));
    expect((await list(`?user_id=${u}&limit=2`, t.headers)).body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual(newestFirst.slice(0, 2));
    expect((await list("?limit=100", t.headers)).body.memories).toHaveLength(21);
    expect((await list("?limit=1", t.headers)).body.memories).toHaveLength(1);
  });

  it("answers an empty list for a user without memories", async () => {
    expect(await list(`?user_id=${user()}`)).toEqual(expect.objectContaining({ status: 200, body: { memories: [], has_more: false } }));
  });

  it("pages back with before=<memory_id> and has_more, per user or for the whole agent", async () => {
    const t = await createTenant(prisma);
    const [u, other] = [user(), user()];
    const ids = await seed(u, Array.from({ length: 45 }, (_, i) => `page ${i + 1}`), t.headers);
    const [otherId] = await seed(other, ["someone else's"], t.headers);
    const pages: { ids: string[]; has_more: boolean }[] = [];
    let before = "";
    do {
      const res = await list(`?user_id=${u}&limit=20${before}`, t.headers);
      expect(res.status).toBe(200);
      const pageIds = res.body.memories.map((m: { memory_id: string }) => m.memory_id);
      pages.push({ ids: pageIds, has_more: res.body.has_more });
      before = `&before=${pageIds.at(-1)}`;
    } while (pages.at(-1)!.has_more && pages.length < 5);
    expect(pages.map((p) => [p.ids.length, p.has_more])).toEqual([[20, true], [20, true], [5, false]]);
    expect(pages.flatMap((p) => p.ids)).toEqual([...ids].reverse());
    // Without user_id the agent's entries of every user page the same way.
    const all = await list(`?limit=2&before=${ids[1]}`, t.headers);
    expect(all.body).toMatchObject({ memories: [{ memory_id: ids[0] }], has_more: false });
    expect((await list(`?before=${ids[44]}`, t.headers)).body.memories[0].memory_id).toBe(ids[43]);
    // A cursor outside the listed scope, or no entry at all, is a bad request.
    for (const [query, headers] of [
      [`?user_id=${u}&before=${otherId}`, t.headers],
      [`?user_id=${u}&before=${ids[3]}`, tenant.headers],
      [`?before=mem_missing`, t.headers],
      [`?before=not%20an%20id`, t.headers],
    ] as const) {
      const res = await list(query, headers);
      expect({ query, status: res.status, code: res.body.error?.code }).toEqual({ query, status: 400, code: "invalid_request" });
    }
  });

  it("pages on from the last entry of a page after that entry was deleted", async () => {
    const u = user();
    const [, second, third] = await seed(u, ["first", "second", "third"]);
    const page = await list(`?user_id=${u}&limit=1`);
    expect(page.body).toMatchObject({ memories: [{ memory_id: third }], has_more: true });
    expect((await remove(third!)).status).toBe(204);
    const next = await list(`?user_id=${u}&limit=1&before=${third}`);
    expect(next).toMatchObject({ status: 200, body: { memories: [{ memory_id: second, content: "second" }], has_more: true } });
  });

  it.each(["?limit=0", "?limit=101", "?limit=abc", "?limit=1.5", "?limit=-1", "?limit=", "?user_id=", "?user_id=a&user_id=b"])(
    "answers 400 invalid_request for %s",
    async (query) => {
      const res = await list(query);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    },
  );

  it("never shows another agent's or another organization's entries", async () => {
    const u = user();
    await seed(u, ["kept to the first agent"]);
    expect((await list(`?user_id=${u}`)).body.memories).toHaveLength(1);
    expect((await list(`?user_id=${u}`, sameOrgOtherAgent)).body.memories).toEqual([]);
    expect((await list(`?user_id=${u}`, otherOrg.headers)).body.memories).toEqual([]);
  });

  it("is also served under /api/v1", async () => {
    const u = user();
    const [id] = await seed(u, ["versioned"]);
    const res = await call("GET", `/api/v1/memory?user_id=${u}`);
    expect(res.status).toBe(200);
    expect(res.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([id]);
  });
});

describe("DELETE /api/memory/:memory_id", () => {
  it("deletes: 204 with no body, then the entry is gone and a second delete is 404", async () => {
    const u = user();
    const [keep, drop] = await seed(u, ["keep me", "drop me"]);
    const res = await remove(drop!);
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expect((await list(`?user_id=${u}`)).body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([keep]);
    const again = await remove(drop!);
    expect([again.status, again.body.error.code]).toEqual([404, "memory_not_found"]);
  });

  it.each(["mem_00000000000000000000000000000000", "not.an.id", "x".repeat(101)])("answers 404 memory_not_found for the unknown id %s", async (id) => {
    const res = await remove(id);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("memory_not_found");
  });

  it("answers 403 forbidden for another organization's entry and keeps it", async () => {
    const u = user();
    const [id] = await seed(u, ["belongs to the first org"]);
    const res = await remove(id!, otherOrg.headers);
    expect([res.status, res.body.error.code]).toEqual([403, "forbidden"]);
    expect((await list(`?user_id=${u}`)).body.memories).toHaveLength(1);
  });

  it("answers 403 forbidden for another agent's entry in the same organization and keeps it", async () => {
    const u = user();
    const [id] = await seed(u, ["belongs to the first agent"]);
    const res = await remove(id!, sameOrgOtherAgent);
    expect([res.status, res.body.error.code]).toEqual([403, "forbidden"]);
    expect((await list(`?user_id=${u}`)).body.memories).toHaveLength(1);
    expect((await remove(id!)).status).toBe(204);
  });
});
