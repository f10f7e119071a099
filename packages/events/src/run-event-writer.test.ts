import { newId, type PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { testEnv, testStores, eventually } from "@agentrun/testing";
import type { RunEvent } from "@agentrun/contracts";
import { RUN_LOG_TTL_AFTER_END_S, runChannel, runLogKey } from "./keys";
import { RunEventWriter } from "./run-event-writer";
import { SubscriberHub } from "./subscriber-hub";

// Writers of many runs on one shared connection, against the real Redis.
let prisma: PrismaClient;
let redis: Redis;
let hub: SubscriberHub;
const redisPrefix = `${testEnv().redisPrefix}:writes`;

testStores({ subscriber: true }, (s) => {
  ({ prisma, redis } = s);
  hub = new SubscriberHub(s.sub!);
});

const deps = () => ({ prisma, redis, redisPrefix });

describe("event writes batched across runs", () => {
  // Writers start a timer for their PostgreSQL batch; these tests never let it fire.
  const created: RunEventWriter[] = [];
  afterEach(async () => {
    jest.restoreAllMocks();
    for (const w of created.splice(0)) await w.drain();
  });

  const nextTurn = () => new Promise((r) => setImmediate(r));

  /** Writers on the shared connection (events stay out of PostgreSQL: no flush is due in these tests). */
  function writers(n: number, opts: { onError?: (runId: string, err: unknown) => void; deleteAtEnd?: string[] } = {}) {
    return Array.from({ length: n }, () => {
      const runId = newId("run");
      const writer = new RunEventWriter({ ...deps(), runId, lastSeq: 1, flushIntervalMs: 600_000, deleteAtEnd: opts.deleteAtEnd, onError: (err) => opts.onError?.(runId, err) });
      created.push(writer);
      return { runId, writer };
    });
  }

  /** Collects what each run's channel carries, parsed (a message holds one event or an array). */
  async function listen(runIds: string[]) {
    const got = new Map<string, RunEvent[]>(runIds.map((id) => [id, []]));
    const unsubs = await Promise.all(
      runIds.map((id) =>
        hub.subscribe(runChannel(redisPrefix, id), (msg) => {
          const parsed = JSON.parse(msg);
          got.get(id)!.push(...(Array.isArray(parsed) ? parsed : [parsed]));
        }),
      ),
    );
    return { got, close: () => unsubs.forEach((u) => u()) };
  }

  /** Resolves once `check` holds (polled every 10 ms, for up to 5 s). */
  const until = (check: () => boolean) => eventually(async () => check(), { timeoutMs: 5000, intervalMs: 10 });

  it("sends the events of many runs emitted in one turn in shared batches, each run's complete and in order", async () => {
    const ws = writers(20);
    const { got, close } = await listen(ws.map((w) => w.runId));
    const pipelines = jest.spyOn(redis, "pipeline");
    const multis = jest.spyOn(redis, "multi");
    const rounds = 10;
    for (let i = 0; i < rounds; i++) {
      for (const w of ws) w.writer.emit({ type: "text_chunk", content: `c${i}` });
      await nextTurn();
    }
    await until(() => [...got.values()].every((events) => events.length === rounds));
    close();
    // 200 emits by 20 runs in 10 turns: a few batches per turn at most, not one write per event or per run.
    expect(pipelines.mock.calls.length + multis.mock.calls.length).toBeLessThanOrEqual(2 * rounds);
    for (const { runId } of ws) {
      const expected = Array.from({ length: rounds }, (_, i) => ({ seq: i + 2, type: "text_chunk", content: `c${i}` }));
      expect(got.get(runId)).toEqual(expected);
      const log = (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).map((e) => JSON.parse(e));
      expect(log).toEqual(expected);
    }
  });

  it("reports a failed write to its own run only; the other runs of the batch are written", async () => {
    const errors: [string, string][] = [];
    const [{ runId: brokenId, writer: broken }, { runId: fineId, writer: fine }] = writers(2, { onError: (runId, err) => errors.push([runId, (err as Error).message]) }) as [
      { runId: string; writer: RunEventWriter },
      { runId: string; writer: RunEventWriter },
    ];
    await redis.set(runLogKey(redisPrefix, brokenId), "not a list"); // RPUSH onto it fails
    const { got, close } = await listen([fineId]);
    broken.emit({ type: "text_chunk", content: "lost" });
    fine.emit({ type: "text_chunk", content: "kept" });
    broken.emit({ type: "text_chunk", content: "lost too" });
    fine.emit({ type: "text_chunk", content: "kept too" });
    await until(() => got.get(fineId)!.length === 2 && errors.length > 0);
    close();
    expect(errors.every(([id, message]) => id === brokenId && /WRONGTYPE/.test(message))).toBe(true);
    expect(got.get(fineId)!.map((e) => (e as { content: string }).content)).toEqual(["kept", "kept too"]);
  });

  it("resolves publishStored once the terminal event is in the log, with the end-of-run expiry and deletions", async () => {
    const hb = `${redisPrefix}:hb:${newId("run")}`;
    await redis.set(hb, "w1");
    const [{ runId, writer }] = writers(1, { deleteAtEnd: [hb] }) as [{ runId: string; writer: RunEventWriter }];
    writer.emit({ type: "text_chunk", content: "a" });
    await writer.publishStored(writer.takeTerminal({ type: "run_completed", run_id: runId, output: "a" } as never));
    const log = (await redis.lrange(runLogKey(redisPrefix, runId), 0, -1)).map((e) => JSON.parse(e).type);
    expect(log).toEqual(["text_chunk", "run_completed"]);
    const ttl = await redis.ttl(runLogKey(redisPrefix, runId));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(RUN_LOG_TTL_AFTER_END_S);
    expect(await redis.exists(hb)).toBe(0);
    expect(writer.ended).toBe(true);
  });
  it("throws for an event it cannot serialize without using up a seq: the run's seqs stay without gaps", async () => {
    const [{ runId, writer }] = writers(1) as [{ runId: string; writer: RunEventWriter }];
    const { got, close } = await listen([runId]);
    writer.emit({ type: "text_chunk", content: "a" });
    const tooDeep = JSON.parse("[".repeat(20_000) + "]".repeat(20_000)) as unknown;
    expect(() => writer.emit({ type: "tool_result", tool: "http", action: "get", result: tooDeep })).toThrow(RangeError);
    writer.emit({ type: "text_chunk", content: "b" });
    expect(writer.lastSeq).toBe(3);
    await until(() => got.get(runId)!.length === 2);
    close();
    expect(got.get(runId)!.map((e) => [e.seq, e.type])).toEqual([[2, "text_chunk"], [3, "text_chunk"]]);
  });
});
