import express from "express";
import request from "supertest";
import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { createLogger } from "@agentrun/logger";
import { runLogKey, SubscriberHub } from "@agentrun/events";
import { createTestRun, testEnv, testStores } from "@agentrun/testing";
import type { GatewayDeps } from "../src/deps";
import { errorHandler } from "../src/middleware/error.middleware";
import { respondWithRun } from "../src/runs/respond-run";
import { listRunEvents, resumeAfter, streamRunEvents } from "../src/runs/run-events-stream";

// The readers of a run (its events endpoint, an Idempotency-Key's SSE replay) when its task's
// delete comes between their look-up of the run and their read of its events. The delete removes
// the run's rows from PostgreSQL (run_started, seq 1, is only there) before its Redis log: these
// tests leave the stores as that first step does, or as both steps do, and hand the readers the
// run as they had looked it up.
let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const REDIS_PREFIX = `${testEnv().redisPrefix}:read-deleted`;
testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});

const logger = createLogger({ service: "test", level: "silent", pretty: false });

/** The events endpoint's stream and a replay's answer, for the run as its look-up found it. */
function app(run: { id: string; taskId: string; status: string; lastSeq: number }) {
  const store = { prisma, redis, redisPrefix: REDIS_PREFIX, hub };
  const deps = { config: { REDIS_PREFIX, RUN_WAIT_TIMEOUT_MS: 5000, SSE_HEARTBEAT_MS: 15_000 }, prisma, redis, hub } as unknown as GatewayDeps;
  const a = express();
  a.use((req, _res, next) => ((req.log = logger), next()));
  a.get("/events", (req, res) => streamRunEvents(req, res, { store, run, afterSeq: resumeAfter(req), heartbeatMs: 15_000 }));
  a.get("/list", async (req, res) => void res.json({ events: await listRunEvents(store, run, resumeAfter(req)) }));
  a.post("/replay", (req, res) => respondWithRun(deps, req, res, { runId: run.id, taskId: run.taskId, stream: true }));
  a.use(errorHandler());
  return a;
}

/** Status, error code, and the events sent as `seq:type`. */
async function answer(req: request.Test) {
  const res = await req.buffer(true).parse((r, done) => {
    let text = "";
    r.on("data", (c: Buffer) => (text += c.toString()));
    r.on("end", () => done(null, text));
  });
  const text = res.body as string;
  const events = [...text.matchAll(/^id: (\d+)\ndata: (.*)$/gm)].map((m) => `${m[1]}:${JSON.parse(m[2]!).type}`);
  return { status: res.status, code: events.length ? undefined : (JSON.parse(text || "{}").error?.code as string | undefined), events };
}

/**
 * A run of its own task, as a reader looked it up (`status`, `lastSeq`); its worker's events 2..
 * in its Redis log; run_started in PostgreSQL.
 */
async function lookedUp(status: string, log: string[]) {
  const id = await createTestRun(prisma, "running");
  const { taskId } = await prisma.run.findUniqueOrThrow({ where: { id }, select: { taskId: true } });
  if (log.length) await redis.rpush(runLogKey(REDIS_PREFIX, id), ...log);
  return { id, taskId, status, lastSeq: 1 + log.length };
}

const LOG = [JSON.stringify({ seq: 2, type: "text_chunk", content: "c" }), JSON.stringify({ seq: 3, type: "run_cancelled" })];
/** The DELETE route's first step: the task's rows go, its runs and their events with them. */
const deleteRows = (taskId: string) => prisma.$executeRaw`DELETE FROM tasks WHERE id = ${taskId}`;

describe("a run whose rows went while its log holds seq 2 to the end", () => {
  it.each(["cancelled", "running"])("events of a run looked up %s: 404 task_not_found, not a stream from seq 2", async (status) => {
    const run = await lookedUp(status, LOG);
    await deleteRows(run.taskId);
    expect(await answer(request(app(run)).get("/events"))).toEqual({ status: 404, code: "task_not_found", events: [] });
  });

  it("events in JSON: 404 task_not_found, not a list from seq 2", async () => {
    const run = await lookedUp("cancelled", LOG);
    await deleteRows(run.taskId);
    const res = await request(app(run)).get("/list");
    expect([res.status, res.body.error?.code]).toEqual([404, "task_not_found"]);
  });

  it("an Idempotency-Key's SSE replay: 404 task_not_found, not a stream from seq 2", async () => {
    const run = await lookedUp("running", LOG);
    await deleteRows(run.taskId);
    expect(await answer(request(app(run)).post("/replay"))).toEqual({ status: 404, code: "task_not_found", events: [] });
  });
});

describe("a run whose rows and log are both gone", () => {
  it.each(["cancelled", "running"])("events of a run looked up %s: 404 task_not_found, not 204 or an empty stream", async (status) => {
    const run = await lookedUp(status, LOG);
    await deleteRows(run.taskId);
    await redis.del(runLogKey(REDIS_PREFIX, run.id));
    expect(await answer(request(app(run)).get("/events"))).toEqual({ status: 404, code: "task_not_found", events: [] });
  });

  it("an Idempotency-Key's SSE replay: 404 task_not_found, not an empty 200", async () => {
    const run = await lookedUp("running", LOG);
    await deleteRows(run.taskId);
    await redis.del(runLogKey(REDIS_PREFIX, run.id));
    expect(await answer(request(app(run)).post("/replay"))).toEqual({ status: 404, code: "task_not_found", events: [] });
  }, 15_000);
});

describe("a run that is there", () => {
  it("streams from run_started to the end, and answers a cursor at the end 204", async () => {
    const run = await lookedUp("cancelled", LOG);
    expect(await answer(request(app(run)).get("/events"))).toEqual({ status: 200, code: undefined, events: ["1:run_started", "2:text_chunk", "3:run_cancelled"] });
    expect((await request(app(run)).get("/events").set("Last-Event-ID", "3")).status).toBe(204);
    expect(await answer(request(app(run)).post("/replay"))).toEqual({ status: 200, code: undefined, events: ["1:run_started", "2:text_chunk", "3:run_cancelled"] });
    const listed = await request(app(run)).get("/list").expect(200);
    expect(listed.body.events.map((e: { seq: number; type: string }) => `${e.seq}:${e.type}`)).toEqual(["1:run_started", "2:text_chunk", "3:run_cancelled"]);
    expect((await request(app(run)).get("/list").set("Last-Event-ID", "3").expect(200)).body).toEqual({ events: [] });
  });
});
