import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import type { RunEvent } from "@agentrun/contracts";
import { createTestRun, testEnv, testStores, within } from "@agentrun/testing";
import { runChannel, runLogKey } from "./keys";
import { followRun } from "./run-event-reader";
import { RunGoneError } from "./run-gone";
import { readFoundRunEvents } from "./stored-events";
import { SubscriberHub } from "./subscriber-hub";

// A reader of a run whose task is deleted after the reader looked the run up. The delete removes
// the run's rows from PostgreSQL (run_started, seq 1, is only there) before its Redis log, which
// until then still holds seq 2 onwards: these tests leave the stores as that first step does.
let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:follow-deleted`;
testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});
const store = () => ({ prisma, redis, redisPrefix });

const chunk = (seq: number) => JSON.stringify({ seq, type: "text_chunk", content: `c${seq}` });
const cancelled = (seq: number) => JSON.stringify({ seq, type: "run_cancelled" });

/** A running run whose worker's events 2.. are in its Redis log (`log`), run_started in PostgreSQL. */
async function runWithLog(log: string[]): Promise<{ runId: string; taskId: string }> {
  const runId = await createTestRun(prisma, "running");
  const { taskId } = await prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { taskId: true } });
  if (log.length) await redis.rpush(runLogKey(redisPrefix, runId), ...log);
  return { runId, taskId };
}

/** The DELETE route's first step: the task's rows go, and its runs and their events with them. */
const deleteRows = (taskId: string) => prisma.$executeRaw`DELETE FROM tasks WHERE id = ${taskId}`;

/**
 * Follows `runId` after `afterSeq` with quick checks (or `pollMs`): what it delivered, whether it
 * was ready, how it ended (a rejection's error).
 */
async function follow(runId: string, afterSeq = 0, onReady?: () => void, pollMs = 100) {
  const seen: number[] = [];
  let ready = false;
  const stop = new AbortController();
  const following = followRun({ ...store(), hub, runId, afterSeq, onEvent: (e: RunEvent) => seen.push(e.seq), signal: stop.signal, pollIntervalMs: pollMs, maxPollIntervalMs: pollMs, onReady: () => ((ready = true), onReady?.()) });
  const end = await within(following.catch((err: unknown) => err), 5000);
  stop.abort();
  return { seen, ready, end };
}

it("rejects, before it is ready and having delivered nothing, a run whose rows are gone while its log holds seq 2 to the end", async () => {
  const { runId, taskId } = await runWithLog([chunk(2), cancelled(3)]);
  await deleteRows(taskId);
  const { seen, ready, end } = await follow(runId);
  expect({ seen, ready }).toEqual({ seen: [], ready: false });
  expect(end).toBeInstanceOf(RunGoneError);
});

it("rejects, before it is ready, a run whose rows and log are both gone", async () => {
  const { runId, taskId } = await runWithLog([]);
  await deleteRows(taskId);
  const { seen, ready, end } = await follow(runId);
  expect({ seen, ready }).toEqual({ seen: [], ready: false });
  expect(end).toBeInstanceOf(RunGoneError);
});

it("ends, without going past the missing events, a run deleted after it was ready", async () => {
  // The reader holds run_started and is ready (nothing new yet); then the rows go, and the log
  // it is left with does not start where the reader is. The end's message makes it read the
  // stores (its periodic checks are a minute apart).
  const { runId, taskId } = await runWithLog([]);
  const { seen, ready, end } = await follow(runId, 1, () => {
    void (async () => {
      await deleteRows(taskId);
      await redis.rpush(runLogKey(redisPrefix, runId), chunk(3), cancelled(4));
      await redis.publish(runChannel(redisPrefix, runId), cancelled(4));
    })();
  }, 60_000);
  expect({ seen, ready, end }).toEqual({ seen: [], ready: true, end: null });
});

it("still goes past a seq lost for good in a run that exists", async () => {
  // Seq 2 reached neither store; the run is there.
  const { runId } = await runWithLog([chunk(3), cancelled(4)]);
  const { seen, ready, end } = await follow(runId);
  expect({ seen, ready }).toEqual({ seen: [1, 3, 4], ready: true });
  expect(end).toMatchObject({ seq: 4, type: "run_cancelled" });
});

it("reads a found run's events as they are while it exists, and rejects once its rows are gone", async () => {
  const { runId, taskId } = await runWithLog([chunk(2)]);
  expect((await readFoundRunEvents(store(), runId)).map((e) => e.seq)).toEqual([1, 2]);
  // Nothing after the last event: a reader that is up to date.
  expect(await readFoundRunEvents(store(), runId, 2)).toEqual([]);
  await deleteRows(taskId);
  await expect(readFoundRunEvents(store(), runId)).rejects.toBeInstanceOf(RunGoneError);
  await expect(readFoundRunEvents(store(), runId, 2)).rejects.toBeInstanceOf(RunGoneError);
});
