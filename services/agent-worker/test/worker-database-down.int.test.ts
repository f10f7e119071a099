import Redis from "ioredis";
import { createTenant, eventually, startPgRelay, startStack, testEnv, testPrisma, watchSse, type PgRelay, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { workersKey } from "@agentrun/events";
import { createRunQueue, type AgentRunJob, type Queue } from "@agentrun/queue";

// A worker that cannot use its database (refused connections beside healthy workers, "too many
// clients", a partition) stops taking jobs instead of failing them, and takes them again once
// the database is back.
let stack: Stack;
let relay: PgRelay;
let prisma: PrismaClient;
let redis: Redis;
let queue: Queue<AgentRunJob>;
let tenant: Tenant;

beforeAll(async () => {
  relay = await startPgRelay(testEnv().databaseUrl);
  stack = await startStack({ workers: 0, memory: false });
  await stack.addWorker({ DATABASE_URL: relay.url });
  prisma = testPrisma(testEnv().databaseUrl);
  redis = new Redis(stack.env.REDIS_URL!);
  queue = createRunQueue({ connection: redis, redisPrefix: stack.env.REDIS_PREFIX! });
  tenant = await createTenant(prisma);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await queue?.close();
  redis?.disconnect();
  await relay?.close();
  await prisma?.$disconnect();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Whether the worker is in the registry of live workers. */
const registered = async () => (await redis.zscore(workersKey(stack.env.REDIS_PREFIX!), "worker-1")) !== null;

/** Cuts the worker off its database and waits until its next check (every 5 s) notices: it leaves the registry, and stops fetching unless a run is in progress there. */
async function takeDatabaseAway() {
  relay.setDown(true);
  await eventually(async () => !(await registered()), { timeoutMs: 20_000 });
}

it("leaves runs queued, their attempts unused, while its database is out of reach, and runs them once it is back", async () => {
  await takeDatabaseAway();

  const live = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:3] held back" }, headers: tenant.headers, timeoutMs: 40_000 });
  await live.waitFor((e) => e.type === "run_started");
  const runId: string = live.events[0].run_id;
  // Three attempts with 0.5 s and 1 s back-off would have failed the job for good by now.
  await sleep(3000);
  const job = await queue.getJob(runId);
  expect(["waiting", "delayed"]).toContain(await job!.getState());
  expect(job!.attemptsMade).toBe(0);
  expect((await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status).toBe("queued");
  expect(live.events.map((e) => e.type)).toEqual(["run_started"]);

  relay.setDown(false);
  const streamed = (await live.result).events;
  expect(streamed.at(-1)!.data).toMatchObject({ type: "run_completed" });
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "completed", output: "Echo: held back", workerId: "worker-1" });
  expect(await registered()).toBe(true);
}, 60_000);

it("takes jobs again as soon as its database is back, while a long run it had goes on", async () => {
  const long = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[sleep:20000][chunks:1] long answer" }, headers: tenant.headers, timeoutMs: 60_000 });
  await long.waitFor((e) => e.type === "run_started");
  const longId: string = long.events[0].run_id;
  await eventually(async () => (await prisma.run.findUniqueOrThrow({ where: { id: longId } })).status === "running");
  await takeDatabaseAway();
  const short = watchSse(`${stack.gatewayUrl}/api/run`, { body: { query: "[chunks:2] while the long one runs" }, headers: tenant.headers, timeoutMs: 40_000 });
  await short.waitFor((e) => e.type === "run_started");
  await sleep(2000);
  relay.setDown(false);
  const streamed = (await short.result).events;
  expect(streamed.at(-1)!.data).toMatchObject({ type: "run_completed" });
  // Not held back until the long run ended.
  expect((await prisma.run.findUniqueOrThrow({ where: { id: longId } })).status).toBe("running");
  expect((await long.result).events.at(-1)!.data).toMatchObject({ type: "run_completed" });
}, 90_000);

it("shuts down at once on SIGTERM while it has stopped taking jobs", async () => {
  await takeDatabaseAway();
  const worker = stack.workers[0]!;
  const exited = new Promise<number | null>((resolve) => worker.child.once("exit", (code) => resolve(code)));
  const t0 = Date.now();
  worker.child.kill("SIGTERM");
  expect(await exited).toBe(0);
  // No run to wait for: well within SHUTDOWN_GRACE_MS (10 s).
  expect(Date.now() - t0).toBeLessThan(5000);
}, 40_000);
