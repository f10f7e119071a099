import express from "express";
import request from "supertest";
import type { PrismaClient } from "@agentrun/db";
import { createLogger } from "@agentrun/logger";
import { createRedis, type Redis } from "@agentrun/redis";
import { SubscriberHub } from "@agentrun/events";
import { createTestRun, testEnv, testPrisma } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { failRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import { errorHandler } from "../middleware/error.middleware";
import { endAllWaits, respondWithRun } from "./respond-run";
import { beginStopping } from "../shutdown";

let prisma: PrismaClient;
let sub: Redis;
let hub: SubscriberHub;
// Commands fail: nothing listens on port 1. The subscriber connection works.
let broken: Redis;
let working: Redis;

beforeAll(() => {
  prisma = testPrisma(testEnv().databaseUrl);
  sub = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
  hub = new SubscriberHub(sub);
  broken = createRedis({ url: "redis://127.0.0.1:1", role: "commands", onError: () => {} });
  working = createRedis({ url: testEnv().redisUrl, role: "commands" });
});
afterAll(async () => {
  broken.disconnect();
  working.disconnect();
  sub.disconnect();
  await prisma.$disconnect();
});

/** A gateway route answering for one run, in JSON, with the parts respondWithRun uses. */
function app(input: { runId: string; taskId: string; sent?: RunEvent[]; stream?: boolean }, redis = broken, waitMs = 5000, db: PrismaClient = prisma) {
  const config = { REDIS_PREFIX: `${testEnv().redisPrefix}:respond`, RUN_WAIT_TIMEOUT_MS: waitMs, SSE_HEARTBEAT_MS: 15_000 };
  // Only what respondWithRun reads; the rest of the gateway's dependencies play no part.
  const deps = { config, prisma: db, redis, hub } as unknown as GatewayDeps;
  const logger = createLogger({ service: "test", level: "silent", pretty: false });
  const a = express();
  a.use((req, _res, next) => ((req.log = logger), next()));
  a.post("/run", (req, res) => respondWithRun(deps, req, res, { ...input, stream: input.stream ?? false, fresh: input.sent !== undefined }));
  a.use(errorHandler());
  return a;
}

/** A queued run of a task of its own. */
async function queuedRun(): Promise<{ runId: string; taskId: string }> {
  const runId = await createTestRun(prisma, "queued");
  const { taskId } = await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { taskId: true } });
  return { runId, taskId };
}

/** The event store of {@link app}'s runs, on the working Redis. */
const store = () => ({ prisma, redis: working, redisPrefix: `${testEnv().redisPrefix}:respond` });

describe("respondWithRun (SSE)", () => {
  it("answers a replay whose first read fails 503 unavailable, not as an empty stream: the client may ask again with its key", async () => {
    const { runId, taskId } = await queuedRun();
    const res = await request(app({ runId, taskId, stream: true })).post("/run");
    expect([res.status, res.headers["content-type"], res.body.error?.code]).toEqual([503, expect.stringMatching(/^application\/json/), "unavailable"]);
  });

  it("streams a replay of a run that has ended from its first event to its last", async () => {
    const { runId, taskId } = await queuedRun();
    await failRun(store(), { id: runId, query: "q" }, { code: "model_error", message: "m" }, { onlyIfQueued: true });
    const res = await request(app({ runId, taskId, stream: true }, working)).post("/run").buffer(true).parse((r, done) => {
      let text = "";
      r.on("data", (c: Buffer) => (text += c.toString()));
      r.on("end", () => done(null, text));
    });
    expect(res.status).toBe(200);
    const events = [...(res.body as string).matchAll(/^id: (\d+)\n(?:event: [a-z_]+\n)?data: (.*)$/gm)].map((m) => [Number(m[1]), JSON.parse(m[2]!).type]);
    expect(events).toEqual([[1, "run_started"], [2, "run_failed"]]);
  });
});

describe("respondWithRun (JSON)", () => {
  it("answers 202 with the run's status, not an error, when the events of a run it just created cannot be read", async () => {
    const { runId, taskId } = await queuedRun();
    const started = { seq: 1, type: "run_started", run_id: runId, task_id: taskId } as RunEvent;
    const res = await request(app({ runId, taskId, sent: [started] })).post("/run");
    expect([res.status, res.body]).toEqual([202, { run_id: runId, task_id: taskId, status: "queued" }]);
  });

  it("answers a replay's failure as the error it is: the client may ask again with its key", async () => {
    const { runId, taskId } = await queuedRun();
    const res = await request(app({ runId, taskId })).post("/run");
    expect([res.status, res.body.error?.code]).toEqual([503, "unavailable"]);
  });

  it("answers a replay of a run the queue could not take 503 unavailable, as the first request was: its key is free", async () => {
    const { runId, taskId } = await queuedRun();
    expect(await failRun(store(), { id: runId, query: "q" }, { code: "unavailable", message: "The run queue is unavailable." }, { onlyIfQueued: true })).toBe(true);
    const res = await request(app({ runId, taskId }, working)).post("/run");
    expect([res.status, res.body.error]).toEqual([503, { code: "unavailable", message: "The run queue is unavailable.", details: { run_id: runId, task_id: taskId } }]);
  });

  it("answers a replay of a queued run 202 queued when the database does not answer at the end of the wait: run_started alone is no sign of running", async () => {
    const { runId, taskId } = await queuedRun();
    // The run's status cannot be read when the wait ends (PostgreSQL out of reach); the rest works.
    const down = new Error("Can't reach database server at 127.0.0.1:5432");
    const unreachable = new Proxy(prisma, { get: (target, key) => (key === "run" ? { findUnique: () => Promise.reject(down) } : Reflect.get(target, key)) });
    const res = await request(app({ runId, taskId }, working, 300, unreachable)).post("/run");
    expect([res.status, res.body]).toEqual([202, { run_id: runId, task_id: taskId, status: "queued" }]);
  });

  // Last: shutdown, once begun, stays begun in this module.
  it("answers a run accepted once shutdown has begun at once, 202 with its status, rather than waiting for its end", async () => {
    const { runId, taskId } = await queuedRun();
    const started = { seq: 1, type: "run_started", run_id: runId, task_id: taskId } as RunEvent;
    beginStopping();
    expect(endAllWaits()).toBe(0);
    // A wait of 60 s, longer than this test may take: it answers at once or not in time.
    const res = await request(app({ runId, taskId, sent: [started] }, working, 60_000)).post("/run");
    expect([res.status, res.body]).toEqual([202, { run_id: runId, task_id: taskId, status: "queued" }]);
  }, 10_000);

  it("answers a replay of a run that has ended with its result during shutdown too", async () => {
    const { runId, taskId } = await queuedRun();
    expect(await failRun(store(), { id: runId, query: "q" }, { code: "model_error", message: "The model failed." })).toBe(true);
    beginStopping();
    expect(endAllWaits()).toBe(0);
    const res = await request(app({ runId, taskId }, working, 60_000)).post("/run");
    expect([res.status, res.body.run_id, res.body.status, res.body.error]).toEqual([200, runId, "failed", { code: "model_error", message: "The model failed." }]);
  }, 10_000);
});
