import { AUTH, memoryAppForFile, newScope } from "./memory-app.fixture";

// GET /internal/memories reads the scope, user_id, limit and before; as the gateway's list, it
// refuses any other parameter rather than ignoring it.

const { api } = memoryAppForFile();

it.each([
  ["an unknown parameter", { x: "1" }, "x"],
  ["a parameter in bracket form", { "limit[]": "1" }, "limit[]"],
])("%s is 400 invalid_request naming it", async (_what, extra, key) => {
  const res = await api().get("/internal/memories").set(AUTH).query({ ...newScope(), ...extra }).expect(400);
  expect(res.body.error.code).toBe("invalid_request");
  expect(JSON.stringify(res.body.error.details)).toContain(JSON.stringify(key).slice(1, -1));
});

it("the parameters it reads are still taken", async () => {
  const res = await api().get("/internal/memories").set(AUTH).query({ ...newScope(), user_id: "u", limit: "5" }).expect(200);
  expect(res.body).toEqual({ memories: [], has_more: false });
});
