import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import supertest from "supertest";
import { AppError } from "@agentrun/errors";
import { createMemoryClient } from "@agentrun/memory-client";
import { AUTH, TOKEN, newScope, seed, memoryAppForFile } from "./memory-app.fixture";
import { MAX_SEARCHED_ENTRIES } from "../src/memory-search.service";

const t = memoryAppForFile();

interface View {
  memory_id: string;
  content: string;
  score?: number;
}
const contents = (body: { memories: View[] }) => body.memories.map((m) => m.content);

const search = (body: object) => supertest(t.app).post("/internal/memories/search").set(AUTH).send(body).expect(200);
const context = (body: object) => supertest(t.app).post("/internal/memories/context").set(AUTH).send(body).expect(200);

describe("memory search", () => {
  it("ranks the memories matching more of the query first and leaves out the rest", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["User likes green tea", "User's dog is named Rex", "Prefers tea without sugar", "Works night shifts"]);
    const res = await search({ ...scope, user_id: "u1", query: "what tea does the user like" });
    expect(contents(res.body)).toEqual(["User likes green tea", "Prefers tea without sugar"]);
    const [first, second] = res.body.memories as View[];
    expect(first!.score).toBeGreaterThan(second!.score!);
    expect(second!.score).toBeGreaterThan(0);
    expect(Object.keys(first!).sort()).toEqual(["category", "content", "created_at", "memory_id", "score", "user_id"]);
  });

  it("matches stemmed words and breaks ties by the newest", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["Went hiking in the Alps", "Hikes every Sunday", "Enjoys cooking"]);
    const res = await search({ ...scope, user_id: "u1", query: "Hiking?" });
    expect(contents(res.body)).toEqual(["Hikes every Sunday", "Went hiking in the Alps"]);
  });

  it("reads each entry's stored search document, which its writes keep up to date, rather than parsing its content again", async () => {
    const scope = newScope();
    const [teaId, dogId] = await seed(t.app, scope, "u1", ["User likes green tea", "User's dog is named Rex"]);
    const docs = await t.prisma.$queryRaw<{ id: string; same: boolean }[]>`
      SELECT id, search_doc = to_tsvector('english', content) AS same FROM memory_entries WHERE id IN (${teaId}, ${dogId}) ORDER BY id`;
    expect(docs.map((d) => d.same)).toEqual([true, true]);
    // A document that no longer matches its content (as if written by another parser): the search
    // follows the document.
    await t.prisma.$executeRaw`UPDATE memory_entries SET search_doc = to_tsvector('english', 'zebra') WHERE id = ${teaId}`;
    expect(contents((await search({ ...scope, user_id: "u1", query: "zebra" })).body)).toEqual(["User likes green tea"]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "tea" })).body)).toEqual([]);
    // A change of the content brings its document along.
    await t.prisma.$executeRaw`UPDATE memory_entries SET content = 'User drinks black coffee' WHERE id = ${teaId}`;
    expect(contents((await search({ ...scope, user_id: "u1", query: "coffee" })).body)).toEqual(["User drinks black coffee"]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "zebra" })).body)).toEqual([]);
  });

  it("respects the limit", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["tea one", "tea two", "tea three"]);
    const res = await search({ ...scope, user_id: "u1", query: "tea", limit: 2 });
    expect(contents(res.body)).toEqual(["tea three", "tea two"]);
  });

  it("returns nothing for an empty, stop-word-only or symbol-only query", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["The user likes tea"]);
    for (const query of ["", "   ", "the and of", "?!& | :*", "user"]) {
      const res = await search({ ...scope, user_id: "u1", query });
      expect(res.body).toEqual({ memories: [] });
    }
  });

  it("finds words as PostgreSQL splits them: scripts with combining marks, addresses, host names and numbers", async () => {
    const scope = newScope();
    const entries = ["मुझे चाय पसंद है", "ชอบชาเขียว ชาเขียว", "தேநீர் பிடிக்கும்", "Email is bob.smith@example.com", "Company site acme.io", "Coffee costs 3.50", "Runs node 20.11.1"];
    await seed(t.app, scope, "u1", entries);
    for (const [query, found] of [["चाय", entries[0]], ["ชาเขียว", entries[1]], ["தேநீர்", entries[2]], ["bob.smith@example.com?", entries[3]], ["acme.io", entries[4]], ["3.50", entries[5]], ["20.11.1", entries[6]]] as const) {
      expect([query, contents((await search({ ...scope, user_id: "u1", query })).body)]).toEqual([query, [found]]);
    }
  });

  it("finds a word inside text written without spaces (Chinese, Japanese, Thai) or with joined endings (Korean)", async () => {
    const scope = newScope();
    const entries = ["ユーザーは緑茶が好きです", "我喜欢喝绿茶", "ชอบชาเขียว", "좋아하는 차는 녹차입니다", "Likes black coffee"];
    await seed(t.app, scope, "u1", entries);
    for (const [query, found] of [["緑茶", entries[0]], ["绿茶", entries[1]], ["ชาเขียว", entries[2]], ["녹차", entries[3]], ["ユーザー", entries[0]]] as const) {
      expect([query, contents((await search({ ...scope, user_id: "u1", query })).body)]).toEqual([query, [found]]);
    }
    // The entry sharing more of the query's character pairs ranks first; a question around the word finds it.
    await seed(t.app, scope, "u2", ["紅茶が好き", "緑茶が好きです"]);
    expect(contents((await search({ ...scope, user_id: "u2", query: "緑茶が好き" })).body)).toEqual(["緑茶が好きです", "紅茶が好き"]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "どんなお茶が好き? 緑茶?" })).body)[0]).toBe(entries[0]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "咖啡" })).body)).toEqual([]);
  });

  it("matches the NFC and NFD forms of a word alike, both ways", async () => {
    const scope = newScope();
    const [nfc, nfd] = ["Loves trà đá", "Visited Montréal"].map((text, i) => (i === 0 ? text.normalize("NFC") : text.normalize("NFD")));
    await seed(t.app, scope, "u1", [nfc!, nfd!]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "trà".normalize("NFD") })).body)).toEqual([nfc]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "montréal".normalize("NFC") })).body)).toEqual([nfd]);
  });

  it("counts the query's first 64 lexemes without its stop words: a long message still finds what it asks about", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["Drinks green tea every morning", ...Array.from({ length: 5 }, (_, i) => `Unrelated note ${i}`)]);
    // 80 distinct stop words before the question: none of them takes a place among the terms.
    const preamble = "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its itself they them their theirs themselves what which who whom this that these those am is are was were be been being have has had having do does did doing a an the and but if or because as until while of at by for with about against between into through during before after above below to from up down in out on off over under again further then once here there when where why how all any both each few more most other some such no nor not only own same so than too very";
    expect(new Set(preamble.split(" ")).size).toBeGreaterThan(64);
    expect(contents((await search({ ...scope, user_id: "u1", query: `${preamble} which tea should I buy?` })).body)).toEqual(["Drinks green tea every morning"]);
  });

  it("takes tsquery syntax, quotes and backslashes in the query as text", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["Reads O'Reilly books", "Path is C:\\tea\\cup", "Bookmarked http://example.com/it's-here"]);
    // A URL's path is one term holding a quote: it must reach the tsquery quoted.
    expect(contents((await search({ ...scope, user_id: "u1", query: "http://example.com/it's-here" })).body)).toEqual(["Bookmarked http://example.com/it's-here"]);
    for (const query of ["o'reilly", "O'Reilly & | ! <-> :* ( )", "\\ tea\\cup '' \\'"]) {
      expect((await search({ ...scope, user_id: "u1", query })).body.memories.length).toBeGreaterThan(0);
    }
  });

  it(`reads a user's newest ${MAX_SEARCHED_ENTRIES} entries only, whose search stays bounded however many the user saved`, async () => {
    const scope = newScope();
    const [oldest] = await seed(t.app, scope, "u1", ["Collects rare zebra stamps"]);
    const newer = (n: number) => t.prisma.$executeRaw`
      INSERT INTO memory_entries (id, org_id, agent_id, user_id, content, content_hash, created_at)
      SELECT 'mem_bulk_' || ${scope.agent_id} || '_' || g, ${scope.org_id}, ${scope.agent_id}, 'u1', 'Note number ' || g, md5(${scope.agent_id} || g), now() + g * interval '1 ms'
      FROM generate_series(1, ${n}::int) AS g`;
    await newer(MAX_SEARCHED_ENTRIES - 1);
    expect(contents((await search({ ...scope, user_id: "u1", query: "zebra" })).body)).toEqual(["Collects rare zebra stamps"]);
    await t.prisma.$executeRaw`DELETE FROM memory_entries WHERE org_id = ${scope.org_id} AND id <> ${oldest}`;
    await newer(MAX_SEARCHED_ENTRIES);
    expect(contents((await search({ ...scope, user_id: "u1", query: "zebra" })).body)).toEqual([]);
    expect(await t.prisma.memoryEntry.count({ where: { id: oldest } })).toBe(1);
  });

  it("never returns another user's, agent's or organization's memories", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u2", ["Likes tea"]);
    await seed(t.app, { ...scope, agent_id: `${scope.agent_id}_b` }, "u1", ["Likes tea"]);
    await seed(t.app, { ...scope, org_id: `${scope.org_id}_b` }, "u1", ["Likes tea"]);
    const res = await search({ ...scope, user_id: "u1", query: "tea" });
    expect(res.body).toEqual({ memories: [] });
    // The user's own entry in the scope is found, and it alone.
    await seed(t.app, scope, "u1", ["Drinks tea at noon"]);
    expect(contents((await search({ ...scope, user_id: "u1", query: "tea" })).body)).toEqual(["Drinks tea at noon"]);
  });
});

describe("memory context", () => {
  const base = ["Lives in Berlin", "Likes green tea", "Works as a nurse", "Has a dog named Rex", "Prefers tea without sugar", "Is learning Spanish"];

  it("puts the relevant memories first, then the newest others", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", base);
    const res = await context({ ...scope, user_id: "u1", query: "Any tea for me?" });
    expect(contents(res.body)).toEqual([
      "Prefers tea without sugar",
      "Likes green tea",
      "Is learning Spanish",
      "Has a dog named Rex",
      "Works as a nurse",
      "Lives in Berlin",
    ]);
    expect(res.body.memories[0]).not.toHaveProperty("score");
  });

  it("is bounded by max_count", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", base);
    const res = await context({ ...scope, user_id: "u1", query: "tea", max_count: 3 });
    expect(contents(res.body)).toEqual(["Prefers tea without sugar", "Likes green tea", "Is learning Spanish"]);
    const one = await context({ ...scope, user_id: "u1", query: "berlin", max_count: 1 });
    expect(contents(one.body)).toEqual(["Lives in Berlin"]);
  });

  it("is bounded by max_chars and skips an entry that does not fit for shorter ones after it", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["Short one", `Long memory about tea ${"x".repeat(100)}`, "Tiny"]);
    const res = await context({ ...scope, user_id: "u1", query: "tea", max_chars: 20 });
    expect(contents(res.body)).toEqual(["Tiny", "Short one"]);
    const total = contents(res.body).join("").length;
    expect(total).toBeLessThanOrEqual(20);
    const exact = await context({ ...scope, user_id: "u1", query: "nothing relevant", max_chars: 4 });
    expect(contents(exact.body)).toEqual(["Tiny"]);
  });

  it("fills the budgets past long newer entries, with shorter older ones (newest and relevant alike)", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", Array.from({ length: 20 }, (_, i) => `short note ${i}`));
    await seed(t.app, scope, "u1", Array.from({ length: 20 }, (_, i) => `long ${i} ${"x".repeat(2500)}`));
    const newest = await context({ ...scope, user_id: "u1", query: "nothing relevant", max_count: 20, max_chars: 4000 });
    // The newest long entry, then the 19 newest short notes (the other long ones no longer fit).
    expect(contents(newest.body)).toEqual(["long 19 " + "x".repeat(2500), ...Array.from({ length: 19 }, (_, i) => `short note ${19 - i}`)]);

    const relevantScope = newScope();
    await seed(t.app, relevantScope, "u1", Array.from({ length: 5 }, (_, i) => `tea note ${i}`));
    await seed(t.app, relevantScope, "u1", Array.from({ length: 30 }, (_, i) => `tea tea tea ${i} ${"y".repeat(300)}`));
    const relevant = await context({ ...relevantScope, user_id: "u1", query: "tea", max_count: 10, max_chars: 700 });
    const picked = contents(relevant.body);
    // Two long hits fit; the short hits come next, before any newest entry that is not a hit.
    expect(picked.filter((c) => c.startsWith("tea tea tea"))).toHaveLength(2);
    expect(picked.filter((c) => c.startsWith("tea note")).sort()).toEqual(Array.from({ length: 5 }, (_, i) => `tea note ${i}`));
    expect(picked.join("").length).toBeLessThanOrEqual(700);
  });

  it("gives a user with a few memories all of them, and never another user's", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", ["Likes tea", "Owns a bike", "Lives by the sea"]);
    await seed(t.app, scope, "u2", ["Likes tea too", "Owns a car"]);
    const res = await context({ ...scope, user_id: "u1", query: "What should we talk about?" });
    expect(contents(res.body)).toEqual(["Lives by the sea", "Owns a bike", "Likes tea"]);
    const withTea = await context({ ...scope, user_id: "u1", query: "tea" });
    expect(contents(withTea.body)).toEqual(["Likes tea", "Lives by the sea", "Owns a bike"]);
  });

  it("is empty for a user without memories", async () => {
    const res = await context({ ...newScope(), user_id: "nobody", query: "tea" });
    expect(res.body).toEqual({ memories: [] });
  });
});

describe("memory client against the service", () => {
  let server: Server;
  let baseUrl: string;
  beforeAll(async () => {
    server = createServer(t.app).listen(0, "127.0.0.1");
    await new Promise((resolve) => server.once("listening", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("round-trips every call and passes the service's errors through", async () => {
    const client = createMemoryClient({ baseUrl, token: TOKEN });
    const scope = newScope();
    const created = await client.create({ ...scope, user_id: "u1", content: "Likes green tea", category: "preference" });
    expect(created.created).toBe(true);
    expect((await client.create({ ...scope, user_id: "u1", content: "Likes green tea" })).created).toBe(false);
    const id = created.memory.memory_id;
    expect(await client.get(scope, id)).toEqual({ memory: created.memory });
    expect(await client.list({ ...scope, user_id: "u1" })).toEqual({ memories: [created.memory], has_more: false });
    expect((await client.search({ ...scope, user_id: "u1", query: "tea" })).memories.map((m) => m.memory_id)).toEqual([id]);
    expect(await client.context({ ...scope, user_id: "u1", query: "hello" })).toEqual({ memories: [created.memory] });

    await expect(client.get({ ...scope, agent_id: "agt_other" }, id)).rejects.toMatchObject({ code: "forbidden", status: 403 });
    const invalid = await client.create({ ...scope, user_id: "u1", content: "x", category: "nope" as "fact" }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(AppError);
    expect(invalid).toMatchObject({ code: "invalid_request", status: 400, details: [{ path: "category", message: expect.any(String) }] });
    await client.remove(scope, id);
    await expect(client.get(scope, id)).rejects.toMatchObject({ code: "memory_not_found", status: 404 });
    // A wrong internal token is the deployment's fault, not the caller's: never a 401 to pass on.
    await expect(createMemoryClient({ baseUrl, token: "wrong-token-0123456789" }).list(scope)).rejects.toMatchObject({ code: "unavailable", status: 503 });
  });
});
