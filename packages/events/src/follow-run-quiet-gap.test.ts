import { randomUUID } from "node:crypto";
import type { RunEvent } from "@agentrun/contracts";
import { createTestRun, testEnv, testStores, within } from "@agentrun/testing";
import { runChannel, runLogKey } from "./keys";
import { followRun } from "./run-event-reader";
import { SubscriberHub } from "./subscriber-hub";

// A follower whose checks have spread out over a quiet spell, when the run speaks again with a
// gap: seq 3's append to the log failed, seq 4 was appended and published, and seq 3 reaches
// PostgreSQL with the writer's next batch, after the follower's immediate read. The follower's
// checks start over at their first interval, so seq 3 arrives then, not a long interval later.
const stores = testStores({ subscriber: true });
const redisPrefix = `${testEnv().redisPrefix}:quiet-gap:${randomUUID().slice(0, 8)}`;
const chunk = (seq: number) => ({ seq, type: "text_chunk", content: `c${seq}` });

it("fills a gap that opens after a quiet spell at its checks' first interval, not at the spread-out one", async () => {
  const { prisma, redis } = stores;
  const hub = new SubscriberHub(stores.sub!);
  const runId = await createTestRun(prisma, "running");
  const key = runLogKey(redisPrefix, runId);
  await redis.rpush(key, JSON.stringify(chunk(2)));
  const seen: number[] = [];
  const stop = new AbortController();
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  // Checks 100, 200, 400, 800, 1600, 3200 ms apart while nothing happens, up to 6.4 s.
  const following = followRun({ prisma, redis, redisPrefix, hub, runId, afterSeq: 1, onEvent: (e: RunEvent) => seen.push(e.seq), signal: stop.signal, pollIntervalMs: 100, maxPollIntervalMs: 6400, onReady: ready });
  try {
    await within(isReady, 5000);
    // The quiet spell: the checks are 3.2 s apart by its end.
    await new Promise((r) => setTimeout(r, 3500));
    expect(seen).toEqual([2]);
    await redis.rpush(key, JSON.stringify(chunk(4)));
    await redis.publish(runChannel(redisPrefix, runId), JSON.stringify(chunk(4)));
    // After the follower's immediate read of the stores (which finds no seq 3 anywhere).
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual([2]);
    const stored = Date.now();
    await prisma.runEventBatch.create({ data: { runId, firstSeq: 3, lastSeq: 3, events: [chunk(3)] } });
    while (seen.length < 3 && Date.now() - stored < 5000) await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([2, 3, 4]);
    // Found by one of the checks that started over (100, 200, 400 ms…), not 3.2 s or more on.
    expect(Date.now() - stored).toBeLessThan(1500);
  } finally {
    stop.abort();
    await following;
    await redis.unlink(key);
  }
});
