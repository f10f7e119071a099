import IORedis from "ioredis";
import { runLogKey } from "@agentrun/events";
import { readSse, runJson, stackWithTenant, type PgRelay, type Stack, type Tenant } from "@agentrun/testing";

jest.setTimeout(90_000);

// Re-attaching to a run in progress while a store fails the stream's first read: the gateway
// reaches PostgreSQL through a relay that cuts the connection of the events read. No worker: the
// run stays queued, and with its Redis log gone the first read is PostgreSQL's.
let relay: PgRelay;
let stack: Stack;
let redis: IORedis;
let tenant: Tenant;

// Unnamed statements, so that each read's text (which the cut is matched on) is on the wire.
stackWithTenant((started) => ({ stack, tenant, redis, relay } = started as typeof started & { redis: IORedis; relay: PgRelay }), {
  stack: { workers: 0, gatewayEnv: { DB_PREPARED_STATEMENTS: "false", RUN_WAIT_TIMEOUT_MS: "500" } },
  tenant: { plan: "enterprise", rpmLimit: 100_000, credits: 100 },
  redis: true,
  pgRelay: true,
});

it("answers 503 unavailable, not an empty stream, when the first read of a run in progress fails; a retry streams it", async () => {
  const accepted = await runJson(stack.gatewayUrl, tenant.headers, { query: "followed through an outage", stream: false });
  expect(accepted).toMatchObject({ status: 202, body: { status: "queued" } });
  const { run_id: runId, task_id: taskId } = accepted.body;
  await redis.del(runLogKey(stack.env.REDIS_PREFIX!, runId));
  const url = `${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/events`;

  const cuts = relay.cuts();
  relay.cutBeforeNextStatement("run_event_batches");
  const failed = await readSse(url, { headers: { ...tenant.headers, "last-event-id": "0" }, timeoutMs: 20_000 });
  expect(relay.cuts()).toBe(cuts + 1);
  expect(failed.status).toBe(503);
  expect(failed.headers.get("content-type")).toMatch(/^application\/json/);
  expect(failed.body).toMatchObject({ error: { code: "unavailable" } });
  // With the headers every answer carries.
  for (const name of ["x-request-id", "x-ratelimit-limit", "x-content-type-options"]) expect([name, failed.headers.get(name)]).toEqual([name, expect.any(String)]);
  expect([failed.headers.get("cache-control"), failed.headers.get("x-heartbeat-interval-ms")]).toEqual([null, null]);

  // The same request once the store answers: the stream, from its first event on.
  const retried = await readSse(url, { headers: { ...tenant.headers, "last-event-id": "0" }, until: (e) => e.data.type === "run_started", timeoutMs: 20_000 });
  expect(retried.status).toBe(200);
  expect(retried.events.map((e) => [e.id, e.data.type])).toEqual([["1", "run_started"]]);
});
