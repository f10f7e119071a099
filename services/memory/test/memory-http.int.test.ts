import supertest from "supertest";
import { createPrisma, dropDatabase, ensureDatabase } from "@agentrun/db";
import { testEnv } from "@agentrun/testing";
import { createLogger } from "@agentrun/logger";
import { createApp } from "../src/app";
import { AUTH, newScope, memoryAppForFile } from "./memory-app.fixture";

// The memory service as an HTTP service: its token, health, readiness, request ids and error
// answers (its entries' create, list and validation: memory.int.test.ts).

const t = memoryAppForFile();

const api = t.api;

describe("memory service: auth, health and errors", () => {
  it("requires the internal token on every /internal route", async () => {
    const scope = newScope();
    const realm = 'Bearer realm="agentrun-memory"';
    for (const [req, challenge] of [
      [api().get("/internal/memories").query(scope), realm],
      [api().post("/internal/memories").send({ ...scope, user_id: "u", content: "x" }), realm],
      [api().get("/internal/memories/mem_x").query(scope).set({ authorization: "Bearer wrong-token-0123456789" }), `${realm}, error="invalid_token"`],
      [api().post("/internal/memories/search").set({ authorization: "Basic abc" }).send({}), `${realm}, error="invalid_request"`],
    ] as const) {
      const res = await req.expect(401);
      expect(res.body).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
      expect(res.headers["www-authenticate"]).toBe(challenge);
    }
  });

  it("answers health and readiness without a token", async () => {
    await api().get("/healthz").expect(200, { status: "ok" });
    await api().get("/readyz").expect(200, { status: "ok" });
  });

  it("echoes an X-Request-Id the gateway takes (and forwards) and generates one otherwise", async () => {
    for (const id of ["req-abc.123", "checkout/step 2 #7", "x".repeat(200)]) {
      const echoed = await api().get("/healthz").set("X-Request-Id", id);
      expect(echoed.headers["x-request-id"]).toBe(id);
    }
    for (const bad of ["bad id\twith a tab", "x".repeat(201), "caf\u00e9"]) {
      const generated = await api().get("/healthz").set("X-Request-Id", bad);
      expect(generated.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it("answers unknown routes and malformed JSON in the contract's error shape", async () => {
    const unknown = await api().get("/internal/nope").set(AUTH).expect(404);
    expect(unknown.body.error.code).toBe("not_found");
    await api().get("/nope").expect(404);
    const malformed = await api().post("/internal/memories").set(AUTH).set("content-type", "application/json").send('{"content":').expect(400);
    expect(malformed.body.error.code).toBe("invalid_request");
  });

  it("answers 400 for a malformed percent-escape in a path parameter, not 500", async () => {
    for (const id of ["%zz", "%E0%A4%A"]) {
      for (const method of ["get", "delete"] as const) {
        const res = await api()[method](`/internal/memories/${id}?org_id=o&agent_id=a`).set(AUTH).expect(400);
        expect(res.body).toEqual({ error: { code: "invalid_request", message: "The URL contains a malformed percent-encoding." } });
      }
    }
  });

  it("answers 503 unavailable while the database cannot be reached", async () => {
    const down = createPrisma({ databaseUrl: "postgresql://postgres@127.0.0.1:1/agentrun_down" });
    const app = createApp({ prisma: down, logger: createLogger({ service: "memory", level: "silent" }), internalToken: "test-internal-token-0123456789" });
    try {
      const ready = await supertest(app).get("/readyz").expect(503);
      expect(ready.body.error.code).toBe("unavailable");
      await supertest(app).get("/healthz").expect(200);
      const list = await supertest(app).get("/internal/memories").set(AUTH).query(newScope()).expect(503);
      expect(list.body).toEqual({ error: { code: "unavailable", message: expect.any(String) } });
    } finally {
      await down.$disconnect();
    }
  });
});

describe("memory service readiness on a database without its migrations", () => {
  it("answers 503 not_migrated, so that it is not taken for ready, and 503 to its requests", async () => {
    const empty = new URL(testEnv().databaseUrl);
    empty.pathname = `${empty.pathname}_memory_empty`;
    await ensureDatabase(empty.toString());
    const prisma = createPrisma({ databaseUrl: empty.toString() });
    try {
      const app = createApp({ prisma, logger: createLogger({ service: "memory", level: "silent" }), internalToken: "test-internal-token-0123456789" });
      const ready = await supertest(app).get("/readyz").expect(503);
      expect(ready.body.error).toMatchObject({ code: "unavailable", details: { database: "not_migrated" } });
      // Its requests get 503 too, not 500: the table they read is not there.
      const list = await supertest(app).get("/internal/memories").set(AUTH).query(newScope()).expect(503);
      expect(list.body).toEqual({ error: { code: "unavailable", message: "The service's database is not migrated to this version yet; retry once it is." } });
    } finally {
      await prisma.$disconnect();
      await dropDatabase(empty.toString());
    }
  });
});
