import type { PrismaClient } from "@agentrun/db";
import type { Redis } from "@agentrun/redis";
import { controlChannel, runCancelKey } from "@agentrun/events";
import { createTestRun, eventually, testEnv, testStores } from "@agentrun/testing";
import { cancelRun } from "./cancel-run";

let prisma: PrismaClient;
let redis: Redis;
let sub: Redis;
const redisPrefix = `${testEnv().redisPrefix}:cancel`;
const control: string[] = [];

testStores({ subscriber: true }, (s) => ({ prisma, redis, sub } = s as Required<typeof s>));
beforeAll(async () => {
  sub.on("message", (_channel: string, msg: string) => control.push(msg));
  await sub.subscribe(controlChannel(redisPrefix));
});

const deps = () => ({ prisma, redis, redisPrefix });
const stateOf = (runId: string) => prisma.run.findUniqueOrThrow({ where: { id: runId }, select: { status: true, task: { select: { activeRunId: true } } } });

describe("cancelRun", () => {
  it("ends a queued run at once, without involving the workers", async () => {
    const runId = await createTestRun(prisma, "queued");
    await cancelRun(deps(), { id: runId, status: "queued", query: "q" });
    expect(await stateOf(runId)).toEqual({ status: "cancelled", task: { activeRunId: null } });
    expect(await redis.exists(runCancelKey(redisPrefix, runId))).toBe(0);
  });

  it("leaves a run that a worker claimed after it was read as queued to that worker, and tells it to stop", async () => {
    const runId = await createTestRun(prisma, "queued");
    // The caller read the run as queued; a worker claims it before the cancel goes through.
    await prisma.$queryRaw`SELECT * FROM agentrun_claim_run(${runId}, ${"worker-1"}, ${20}::integer)`;
    await cancelRun(deps(), { id: runId, status: "queued", query: "q" });
    // Not ended under the worker's feet: the worker ends it, with the events it emitted so far.
    expect(await stateOf(runId)).toEqual({ status: "running", task: { activeRunId: runId } });
    expect(await redis.get(runCancelKey(redisPrefix, runId))).toBe("1");
    await eventually(async () => control.some((m) => JSON.parse(m).run_id === runId), { timeoutMs: 2000, intervalMs: 10 });
  });
});
