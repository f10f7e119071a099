import supertest from "supertest";
import { AUTH, newScope, seed, memoryAppForFile } from "./memory-app.fixture";

const t = memoryAppForFile();

const api = t.api;

describe("memory service: create, read, delete", () => {
  it("creates an entry and reads it back in its public shape", async () => {
    const scope = newScope();
    const res = await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u1", content: "  Likes green tea \n", category: "preference" }).expect(201);
    expect(res.body).toEqual({
      created: true,
      memory: { memory_id: expect.stringMatching(/^mem_[0-9a-f]{32}$/), content: "Likes green tea", category: "preference", user_id: "u1", created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) },
    });
    const got = await api().get(`/internal/memories/${res.body.memory.memory_id}`).set(AUTH).query(scope).expect(200);
    expect(got.body).toEqual({ memory: res.body.memory });
  });

  it("defaults the category to general", async () => {
    const res = await api().post("/internal/memories").set(AUTH).send({ ...newScope(), user_id: "u1", content: "Has a cat" }).expect(201);
    expect(res.body.memory.category).toBe("general");
  });

  it("deletes an entry; afterwards it is not found", async () => {
    const scope = newScope();
    const [id] = await seed(t.app, scope, "u1", ["Lives in Lisbon"]);
    await api().delete(`/internal/memories/${id}`).set(AUTH).query(scope).expect(204, "");
    const res = await api().get(`/internal/memories/${id}`).set(AUTH).query(scope).expect(404);
    expect(res.body.error.code).toBe("memory_not_found");
    await api().delete(`/internal/memories/${id}`).set(AUTH).query(scope).expect(404);
  });

  it("answers 403 for another agent's or organization's entry and 404 for an unknown one", async () => {
    const scope = newScope();
    const [id] = await seed(t.app, scope, "u1", ["Speaks French"]);
    const otherAgent = { ...scope, agent_id: `${scope.agent_id}_other` };
    const otherOrg = { ...scope, org_id: `${scope.org_id}_other` };
    for (const wrong of [otherAgent, otherOrg]) {
      const get = await api().get(`/internal/memories/${id}`).set(AUTH).query(wrong).expect(403);
      expect(get.body.error.code).toBe("forbidden");
      const del = await api().delete(`/internal/memories/${id}`).set(AUTH).query(wrong).expect(403);
      expect(del.body.error.code).toBe("forbidden");
    }
    await api().get(`/internal/memories/${id}`).set(AUTH).query(scope).expect(200);
    for (const unknown of ["mem_00000000000000000000000000000000", "not%20an%20id"]) {
      const res = await api().get(`/internal/memories/${unknown}`).set(AUTH).query(scope).expect(404);
      expect(res.body.error.code).toBe("memory_not_found");
    }
    await api().get(`/internal/memories/${id}`).set(AUTH).query({ org_id: scope.org_id }).expect(400);
  });

  it("stores an exact duplicate once and returns the existing entry, with the latest category", async () => {
    const scope = newScope();
    const first = await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u1", content: "Likes jazz" }).expect(201);
    const again = await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u1", content: " Likes jazz  ", category: "fact" }).expect(200);
    expect(again.body).toEqual({ memory: { ...first.body.memory, category: "fact" }, created: false });
    const stored = await api().get(`/internal/memories/${first.body.memory.memory_id}`).set(AUTH).query(scope).expect(200);
    expect(stored.body.memory).toEqual({ ...first.body.memory, category: "fact" });
    // The same text for another user, or different text, is a new entry.
    await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u2", content: "Likes jazz" }).expect(201);
    await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u1", content: "likes jazz" }).expect(201);
  });

  it("takes text that differs only in Unicode composition (NFC, NFD) as the same entry", async () => {
    const scope = { ...newScope(), user_id: "u1" };
    const composed = "Loves café au lait".normalize("NFC");
    const decomposed = composed.normalize("NFD");
    expect(decomposed).not.toBe(composed);
    const first = await api().post("/internal/memories").set(AUTH).send({ ...scope, content: composed }).expect(201);
    const again = await api().post("/internal/memories").set(AUTH).send({ ...scope, content: decomposed }).expect(200);
    expect(again.body).toEqual({ memory: first.body.memory, created: false });
    expect(await t.prisma.memoryEntry.count({ where: { orgId: scope.org_id, agentId: scope.agent_id } })).toBe(1);
  });

  it("stores one row when identical creates race", async () => {
    const scope = newScope();
    const body = { ...scope, user_id: "u1", content: "Allergic to peanuts", category: "fact" };
    const results = await Promise.all(Array.from({ length: 8 }, () => api().post("/internal/memories").set(AUTH).send(body)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.memory.memory_id)).size).toBe(1);
    expect(await t.prisma.memoryEntry.count({ where: { orgId: scope.org_id, agentId: scope.agent_id } })).toBe(1);
  });
});

describe("memory service: list", () => {
  it("lists newest first, per user or for every user of the agent, bounded by limit", async () => {
    const scope = newScope();
    const a = await seed(t.app, scope, "u1", ["one", "two", "three"]);
    const b = await seed(t.app, scope, "u2", ["four"]);
    await seed(t.app, newScope(), "u1", ["another scope"]);

    const mine = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id: "u1" }).expect(200);
    expect(mine.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([...a].reverse());
    const all = await api().get("/internal/memories").set(AUTH).query(scope).expect(200);
    expect(all.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([...b, ...[...a].reverse()]);
    const two = await api().get("/internal/memories").set(AUTH).query({ ...scope, limit: "2" }).expect(200);
    expect(two.body.memories).toHaveLength(2);
    const none = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id: "nobody" }).expect(200);
    expect(none.body).toEqual({ memories: [], has_more: false });
    expect(two.body.has_more).toBe(true);
    const rest = await api().get("/internal/memories").set(AUTH).query({ ...scope, limit: "2", before: two.body.memories[1].memory_id }).expect(200);
    expect(rest.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([a[1], a[0]]);
    expect(rest.body.has_more).toBe(false);
  });

  it("pages on from a cursor entry deleted since its page", async () => {
    const scope = newScope();
    const [, second, third] = await seed(t.app, scope, "u1", ["one", "two", "three"]);
    const first = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id: "u1", limit: "1" }).expect(200);
    expect(first.body).toMatchObject({ memories: [{ memory_id: third }], has_more: true });
    await api().delete(`/internal/memories/${third}`).set(AUTH).query(scope).expect(204);
    const next = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id: "u1", limit: "1", before: third }).expect(200);
    expect(next.body).toMatchObject({ memories: [{ memory_id: second, content: "two" }], has_more: true });
  });

  it("places a deleted cursor exactly where its entry stood, among entries of the same millisecond too", async () => {
    const scope = newScope();
    const user_id = "u1";
    // Ids as newId makes them, five sharing one millisecond: the id breaks the tie.
    const ms = Date.now() - 60_000;
    const idAt = (time: number, rand: string) => `mem_${time.toString(16).padStart(12, "0")}7000${rand.padStart(16, "8")}`;
    const ids = [idAt(ms - 1, "1"), ...["1", "2", "3", "4", "5"].map((r) => idAt(ms, r)), idAt(ms + 1, "1")];
    await t.prisma.memoryEntry.createMany({
      data: ids.map((id, i) => ({ id, orgId: scope.org_id, agentId: scope.agent_id, userId: user_id, content: `entry ${i}`, contentHash: `hash ${i}`, createdAt: new Date(Number.parseInt(id.slice(4, 16), 16)) })),
    });
    const newestFirst = [...ids].reverse();
    const all = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id }).expect(200);
    expect(all.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual(newestFirst);
    for (const [i, cursor] of newestFirst.entries()) {
      await t.prisma.memoryEntry.delete({ where: { id: cursor } });
      const rest = await api().get("/internal/memories").set(AUTH).query({ ...scope, user_id, before: cursor }).expect(200);
      expect({ cursor, rest: rest.body.memories.map((m: { memory_id: string }) => m.memory_id) }).toEqual({ cursor, rest: newestFirst.slice(i + 1) });
    }
  });

  it("stores each entry's creation time as the time its id carries", async () => {
    const [id] = await seed(t.app, newScope(), "u1", ["Reads at night"]);
    const row = await t.prisma.memoryEntry.findUniqueOrThrow({ where: { id: id! } });
    expect(row.createdAt.getTime()).toBe(Number.parseInt(id!.slice(4, 16), 16));
  });

  it("answers 400 for a cursor of another user, agent or organization, and for one that is not a memory id", async () => {
    const scope = newScope();
    const [mine] = await seed(t.app, scope, "u1", ["mine"]);
    const [theirs] = await seed(t.app, scope, "u2", ["theirs"]);
    const [otherAgents] = await seed(t.app, { ...scope, agent_id: `${scope.agent_id}_other` }, "u1", ["another agent's"]);
    const [otherOrgs] = await seed(t.app, { ...scope, org_id: `${scope.org_id}_other` }, "u1", ["another organization's"]);
    for (const query of [
      { ...scope, user_id: "u1", before: theirs },
      { ...scope, user_id: "u1", before: otherAgents },
      { ...scope, before: otherOrgs },
      { ...scope, before: "mem_missing" },
      { ...scope, before: "mem_00000000000000000000000000000000" },
      { ...scope, before: "not an id" },
    ]) {
      const res = await api().get("/internal/memories").set(AUTH).query(query).expect(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    // The agent's list without user_id takes another user's entry as its cursor.
    const agentWide = await api().get("/internal/memories").set(AUTH).query({ ...scope, before: theirs }).expect(200);
    expect(agentWide.body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([mine]);
  });

  it("defaults the limit to 20", async () => {
    const scope = newScope();
    await seed(t.app, scope, "u1", Array.from({ length: 21 }, (_, i) => `memory ${i}`));
    const res = await api().get("/internal/memories").set(AUTH).query(scope).expect(200);
    expect(res.body.memories).toHaveLength(20);
    expect(res.body.memories[0].content).toBe("memory 20");
  });
});

describe("memory service: validation", () => {
  const invalid = async (req: supertest.Test, field: string) => {
    const res = await req.set(AUTH).expect(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details).toEqual(expect.arrayContaining([{ path: field, message: expect.any(String) }]));
  };

  it("rejects bad create bodies", async () => {
    const scope = newScope();
    await invalid(api().post("/internal/memories").send({ ...scope, user_id: "u", content: "x", category: "secret" }), "category");
    await invalid(api().post("/internal/memories").send({ ...scope, user_id: "u", content: "x".repeat(4001) }), "content");
    await invalid(api().post("/internal/memories").send({ ...scope, user_id: "u", content: "   " }), "content");
    await invalid(api().post("/internal/memories").send({ ...scope, content: "x" }), "user_id");
    await invalid(api().post("/internal/memories").send({ user_id: "u", content: "x", agent_id: scope.agent_id }), "org_id");
    await api().post("/internal/memories").set(AUTH).send({ ...scope, user_id: "u", content: "x".repeat(4000) }).expect(201);
  });

  it("rejects a body that is not JSON", async () => {
    const res = await api().post("/internal/memories").set(AUTH).set("content-type", "text/plain").send("hello").expect(415);
    expect(res.body.error.code).toBe("unsupported_media_type");
  });

  it("rejects U+0000, which PostgreSQL cannot store, with 400 naming the field", async () => {
    const scope = newScope();
    await invalid(api().post("/internal/memories").send({ ...scope, user_id: "u", content: "a\u0000b" }), "content");
    await invalid(api().post("/internal/memories").send({ ...scope, user_id: "u\u0000", content: "x" }), "user_id");
    await invalid(api().post("/internal/memories/search").send({ ...scope, user_id: "u\u0000", query: "tea" }), "user_id");
    const inUrl = await api().get("/internal/memories").query({ ...scope, user_id: "u\u0000" }).set(AUTH).expect(400);
    expect(inUrl.body.error).toEqual({ code: "invalid_request", message: expect.stringMatching(/NUL/) });
    // Nothing was stored.
    const list = await api().get("/internal/memories").query(scope).set(AUTH).expect(200);
    expect(list.body.memories).toEqual([]);
  });

  it.each(["0", "101", "abc", "1.5", "-1"])("rejects limit=%s", async (limit) => {
    await invalid(api().get("/internal/memories").query({ ...newScope(), limit }), "limit");
  });

  it("requires the scope on list, search and context", async () => {
    await invalid(api().get("/internal/memories").query({ org_id: "org_x" }), "agent_id");
    await invalid(api().post("/internal/memories/search").send({ org_id: "o", agent_id: "a", query: "tea" }), "user_id");
    await invalid(api().post("/internal/memories/context").send({ org_id: "o", agent_id: "a", user_id: "u", query: "tea", max_count: 0 }), "max_count");
  });
});
