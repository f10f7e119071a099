import { AUTH, memoryAppForFile, newScope } from "./memory-app.fixture";

// GET /internal/memories reads the scope, user_id, limit and before; as the gateway's list, it
// refuses any other parameter rather than ignoring it. Its 400s name each invalid field as the
// gateway's do.

const { api } = memoryAppForFile();

it.each([
  ["an unknown parameter", { x: "1" }, "x"],
  ["a parameter in bracket form", { "limit[]": "1" }, "limit[]"],
])("%s is 400 invalid_request naming it", async (_what, extra, key) => {
  const res = await api().get("/internal/memories").set(AUTH).query({ ...newScope(), ...extra }).expect(400);
  // Named as the gateway names it: the key itself, not the query's empty path.
  expect(res.body.error).toEqual({ code: "invalid_request", message: `Unrecognized key: ${JSON.stringify(key)}`, details: [{ path: key, message: "Unrecognized key" }] });
});

it("a body's invalid fields are named one by one, as the gateway names them", async () => {
  const res = await api().post("/internal/memories").set(AUTH).send({ ...newScope(), user_id: "u", content: 5, category: "nope" }).expect(400);
  expect(res.body.error.code).toBe("invalid_request");
  expect((res.body.error.details as { path: string }[]).map((d) => d.path).sort()).toEqual(["category", "content"]);
  expect(res.body.error.message).toMatch(/^(content|category): .+; (content|category): /);
});

it("the parameters it reads are still taken", async () => {
  const res = await api().get("/internal/memories").set(AUTH).query({ ...newScope(), user_id: "u", limit: "5" }).expect(200);
  expect(res.body).toEqual({ memories: [], has_more: false });
});
