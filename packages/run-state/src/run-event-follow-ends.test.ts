import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { followRun, runLogKey, SubscriberHub } from "@agentrun/events";
import { createTestRun, testEnv, testStores, within } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { finishRun } from "./finish-run";

// A follower of a run whose end is stored finds it from its own reads, not from its periodic
// check of the stores (made a minute long here, so that only the reads can end these follows).
let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:follow-ends`;
testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});
const deps = () => ({ prisma, redis, redisPrefix });
const SLOW_CHECKS = { pollIntervalMs: 60_000 };

/** Follows `runId` after `afterSeq`: what it delivered and how it ended, or "timed out" after 10 s. */
async function follow(runId: string, afterSeq: number) {
  const seen: number[] = [];
  const stop = new AbortController();
  const end = await within(followRun({ ...deps(), ...SLOW_CHECKS, hub, runId, afterSeq, onEvent: (e: RunEvent) => seen.push(e.seq), signal: stop.signal }), 10_000);
  stop.abort();
  return { seen, end };
}

it("goes past every seq lost for good before a run's end, not one gap per check", async () => {
  const runId = await createTestRun(prisma);
  // 3, 5 and 7 reached neither store (appends that failed, their worker gone); 2, 4, 6, 8 are in the log.
  await redis.rpush(runLogKey(redisPrefix, runId), ...[2, 4, 6, 8].map((seq) => JSON.stringify({ seq, type: "text_chunk", content: `c${seq}` })));
  const terminal = await finishRun(deps(), { runId, status: "failed", error: { code: "worker_lost", message: "gone" }, messages: [] });
  expect(terminal).toMatchObject({ seq: 9 });
  expect(await follow(runId, 1)).toEqual({ seen: [2, 4, 6, 8, 9], end: expect.objectContaining({ seq: 9, type: "run_failed" }) });
});
