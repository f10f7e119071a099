import request from "supertest";
import pino from "pino";
import { testEnv } from "@agentrun/testing";
import { createApp } from "../src/app";
import { gatewayConfigSchema } from "../src/config";
import { createGatewayDeps } from "../src/create-deps";
import { beginStopping } from "../src/shutdown";

// The real app on the test database and Redis, as a stopping gateway answers (the process's
// SIGTERM handler calls beginStopping): out of rotation, and no connection kept for later.
let close: () => Promise<void>;
let app: ReturnType<typeof createApp>;

beforeAll(() => {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const config = gatewayConfigSchema.parse({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:stopping` });
  const made = createGatewayDeps(config, pino({ level: "silent" }));
  close = made.close;
  app = createApp(made.deps);
});

afterAll(async () => {
  await close?.();
});

it("answers /readyz 503 once stopping, and closes every connection with its answer", async () => {
  const get = (path: string) => request(app).get(path).set("Connection", "keep-alive");
  expect((await get("/healthz")).headers.connection).toBe("keep-alive");
  beginStopping();
  const ready = await get("/readyz");
  expect(ready.status).toBe(503);
  expect(ready.body).toEqual({ error: { code: "unavailable", message: "Shutting down." } });
  for (const res of [ready, await get("/healthz"), await get("/api/tasks")]) expect(res.headers.connection).toBe("close");
});
