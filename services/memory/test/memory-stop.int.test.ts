import http from "node:http";
import { once } from "node:events";
import pg from "pg";
import { rawExchange, rawHead, rawJsonAnswer, startMemoryService, testEnv, type MemoryService } from "@agentrun/testing";
import supertest from "supertest";
import { ServerStop } from "@agentrun/express-server";
import { createLogger } from "@agentrun/logger";
import { createPrisma } from "@agentrun/db";
import { createApp } from "../src/app";
import { newScope, TOKEN } from "./memory-app.fixture";

// The memory service's stop (SIGTERM) as its callers see it: the gateway and the workers keep
// pooled keep-alive connections to it, busy enough that they never fall idle.

interface Answer {
  status: number;
  connection: string | undefined;
}

function get(agent: http.Agent, url: string, token: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
    });
    req.on("error", reject);
  });
}

let service: MemoryService;
let locker: pg.Client;

beforeAll(async () => {
  service = await startMemoryService();
  locker = new pg.Client({ connectionString: testEnv().databaseUrl });
  await locker.connect();
});

afterAll(async () => {
  await locker.end().catch(() => {});
  await service.stop();
});

it("finishes the request in flight with Connection: close, takes no new one on the kept-alive connection, and exits once it is done", async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const list = `${service.url}/internal/memories?${new URLSearchParams({ ...newScope(), user_id: "u" })}`;
  expect(await get(agent, list, service.token)).toMatchObject({ status: 200, connection: "keep-alive" });

  // A list request held by a lock on the table, on the agent's one connection.
  await locker.query("BEGIN");
  await locker.query("LOCK TABLE memory_entries IN ACCESS EXCLUSIVE MODE");
  const held = get(agent, list, service.token);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const exited = once(service.process.child, "exit");
  service.process.child.kill("SIGTERM");
  await new Promise((resolve) => setTimeout(resolve, 300));
  // The next request waits for the agent's connection, behind the held one.
  const next = get(agent, list, service.token).then(
    (answer) => answer,
    (err: NodeJS.ErrnoException) => err.code,
  );
  await locker.query("COMMIT");
  const releasedAt = Date.now();

  expect(await held).toEqual({ status: 200, connection: "close" });
  expect(await next).toBe("ECONNREFUSED");
  const [code] = await exited;
  expect(code).toBe(0);
  // Not the 10 s grace: nothing was left open.
  expect(Date.now() - releasedAt).toBeLessThan(5000);
  agent.destroy();
});

it("answers 503 a request still sending its body when the grace (10 s) ends, rather than cutting it", async () => {
  const own = await startMemoryService();
  try {
    const body = JSON.stringify({ ...newScope(), user_id: "u", content: "never sent whole" });
    const head = rawHead("POST", "/internal/memories", { authorization: `Bearer ${own.token}`, "content-type": "application/json", "content-length": String(body.length) });
    const exchange = rawExchange(own.url, head + body.slice(0, 10), { timeoutMs: 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exited = once(own.process.child, "exit");
    own.process.child.kill("SIGTERM");
    expect(rawJsonAnswer(await exchange)).toEqual({ status: 503, body: { error: { code: "unavailable", message: "Shutting down: retry the request." } } });
    expect((await exited)[0]).toBe(0);
  } finally {
    await own.stop();
  }
}, 30_000);

it("answers /readyz 503 once stopping, and closes the connection with every answer", async () => {
  const prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 1 });
  try {
    const stop = new ServerStop();
    const app = createApp({ prisma, logger: createLogger({ service: "memory", level: "silent" }), internalToken: TOKEN, stop });
    const ready = () => supertest(app).get("/readyz").set("Connection", "keep-alive");
    expect(await ready()).toMatchObject({ status: 200, headers: { connection: "keep-alive" } });
    stop.begin();
    const stopping = await ready();
    expect(stopping.status).toBe(503);
    expect(stopping.body).toEqual({ error: { code: "unavailable", message: "Shutting down." } });
    expect(stopping.headers.connection).toBe("close");
  } finally {
    await prisma.$disconnect();
  }
});
