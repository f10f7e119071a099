import { createRedis } from "@agentrun/redis";
import { followRun, readDbEvents, RUN_LOG_TTL_AFTER_END_S, RunEventWriter, runLogKey, runWriterKey, SubscriberHub } from "@agentrun/events";
import { createTestRun, eventually, startPgRelay, testEnv, testPrisma, testStores, within } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { failRun, finishRun } from "./finish-run";

// A run whose worker died with events it had published but not stored, against the real
// PostgreSQL and Redis: when Redis lost the run's log too (a restart without its data), those
// events are in neither store, yet clients following the run received them. Their streams must
// still end with the run's terminal event.
const stores = testStores({ subscriber: true });
let hub: SubscriberHub;
beforeAll(() => (hub = new SubscriberHub(stores.sub!)));
const redisPrefix = `${testEnv().redisPrefix}:lostlog`;
const deps = () => ({ prisma: stores.prisma, redis: stores.redis, redisPrefix });
const lost = { code: "worker_lost", message: "gone" };

/** Follows `runId` after `afterSeq`: the events delivered, and the terminal event it resolved with ("timed out" after 10 s). */
function follow(runId: string, afterSeq: number) {
  const events: RunEvent[] = [];
  const controller = new AbortController();
  const following = followRun({ ...deps(), hub, runId, afterSeq, pollIntervalMs: 200, onEvent: (e) => events.push(e), signal: controller.signal });
  // A stream that never ends fails the test rather than holding it.
  const done = within(following, 10_000).finally(() => controller.abort());
  return { events, done };
}

/**
 * A running run of worker `w1` that stored seqs 1–3 and then published 4 and 5 (a client follows
 * it from the start and receives them), and whose worker died before storing them; with
 * `redisLost`, Redis then loses the run's log and writer key. Ended by a sweeper.
 */
async function runEndedAfterItsWorkerDied(redisLost: boolean) {
  const runId = await createTestRun(stores.prisma, "running");
  await stores.prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
  const live = follow(runId, 0);
  writer.emit({ type: "text_chunk", content: "a" });
  writer.emit({ type: "text_chunk", content: "b" });
  await writer.flush();
  writer.emit({ type: "text_chunk", content: "c" });
  writer.emit({ type: "text_chunk", content: "d" });
  await eventually(async () => live.events.length >= 5);
  expect(live.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
  // The worker's first append set the run's writer key; it lives as long as the log.
  expect(await stores.redis.get(runWriterKey(redisPrefix, runId))).toBe("w1");
  await writer.drain();
  if (redisLost) await stores.redis.del(runLogKey(redisPrefix, runId), runWriterKey(redisPrefix, runId));
  expect(await failRun(deps(), { id: runId, query: "q" }, lost)).toBe(true);
  return { runId, live, terminal: await live.done };
}

it("numbers the end right after the last event when Redis kept the run's log", async () => {
  const { runId, live, terminal } = await runEndedAfterItsWorkerDied(false);
  expect(terminal).toMatchObject({ type: "run_failed", seq: 6, error: lost });
  expect(live.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  expect((await readDbEvents(deps(), runId)).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
});

it("numbers the end past a gap when Redis lost the run's log, so that a client holding lost events gets it", async () => {
  const { runId, live, terminal } = await runEndedAfterItsWorkerDied(true);
  // Seqs 4 and 5 are lost for good; the client that has them receives the end after them.
  expect(terminal).toMatchObject({ type: "run_failed", seq: 1004, error: lost });
  expect(live.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 1004]);
  expect((await readDbEvents(deps(), runId)).map((e) => e.seq)).toEqual([1, 2, 3, 1004]);
  expect(await stores.prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "failed", lastSeq: 1004 });
  // Re-attaching with the last seq received: the end, across the gap.
  const again = follow(runId, 5);
  expect(await again.done).toEqual(terminal);
  expect(again.events).toEqual([terminal]);
});

it("keeps the loss known when the end that found it fails: the next taker numbers its end past the gap too", async () => {
  const runId = await createTestRun(stores.prisma, "running");
  await stores.prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
  writer.emit({ type: "text_chunk", content: "a" });
  await writer.flush();
  await writer.drain();
  const key = runWriterKey(redisPrefix, runId);
  await stores.redis.del(runLogKey(redisPrefix, runId), key);
  // The first sweeper's end is lost with its connection (PostgreSQL going away).
  const relay = await startPgRelay(testEnv().databaseUrl);
  const relayed = testPrisma(relay.url);
  try {
    relay.cutBeforeNextStatement("agentrun_finish_run");
    await expect(failRun({ ...deps(), prisma: relayed }, { id: runId, query: "q" }, lost)).rejects.toThrow();
  } finally {
    await relayed.$disconnect();
    await relay.close();
  }
  expect(await stores.redis.get(key)).toBeNull();
  expect(await failRun(deps(), { id: runId, query: "q" }, lost)).toBe(true);
  expect((await readDbEvents(deps(), runId)).map((e) => e.seq)).toEqual([1, 2, 1003]);
});

it("gives the terminal event to a follower past it, and not to one that holds its seq", async () => {
  const { runId, terminal } = await runEndedAfterItsWorkerDied(false);
  // Past the end (a client holding more events than the store kept): the end, out of order.
  const past = follow(runId, 9);
  expect(await past.done).toEqual(terminal);
  expect(past.events).toEqual([terminal]);
  // At the end: that client has it.
  const at = follow(runId, (terminal as RunEvent).seq);
  expect(await at.done).toEqual(terminal);
  expect(at.events).toEqual([]);
});

it("ends a follower past the run's end when the end's publish was lost with the run's log: PostgreSQL tells it", async () => {
  const runId = await createTestRun(stores.prisma, "running");
  const past = follow(runId, 50);
  await new Promise((r) => setTimeout(r, 300));
  // Ended through a Redis that is gone: stored, never published, and no log to find it in.
  const broken = createRedis({ url: "redis://127.0.0.1:1", role: "commands", onError: () => {} });
  try {
    const cutOff = new RunEventWriter({ prisma: stores.prisma, redis: broken, redisPrefix, runId, lastSeq: 1, onError: () => {} });
    await finishRun({ prisma: stores.prisma, redis: broken, redisPrefix }, { runId, status: "completed", output: "", messages: [], writer: cutOff });
  } finally {
    broken.disconnect();
  }
  const terminal = await past.done;
  expect(terminal).toMatchObject({ type: "run_completed", seq: 2 });
  expect(past.events).toEqual([terminal]);
});

it("sets a missing writer key again with the worker's next append, and lets it expire with the log once the run ends", async () => {
  const runId = await createTestRun(stores.prisma, "running");
  await stores.prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
  const key = runWriterKey(redisPrefix, runId);
  writer.emit({ type: "text_chunk", content: "a" });
  await eventually(async () => (await stores.redis.get(key)) === "w1");
  await stores.redis.del(key);
  writer.emit({ type: "text_chunk", content: "b" });
  await eventually(async () => (await stores.redis.get(key)) === "w1");
  // The worker ends the run: the key now expires with the log.
  expect(await finishRun(deps(), { runId, status: "completed", output: "ab", messages: [], writer })).toMatchObject({ seq: 4 });
  const ttl = await stores.redis.ttl(key);
  expect(ttl).toBeGreaterThan(0);
  expect(ttl).toBeLessThanOrEqual(RUN_LOG_TTL_AFTER_END_S);
});
