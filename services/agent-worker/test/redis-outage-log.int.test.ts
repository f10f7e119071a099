import { capturedLogger, eventually, startPrivateRedis, testEnv, type LogLine, type PrivateRedis } from "@agentrun/testing";
import { startAgentWorker, type AgentWorker } from "../src/agent-worker";
import { workerConfigSchema } from "../src/config";
import { gatewayConfigSchema } from "../../gateway/src/config";
import { createGatewayDeps } from "../../gateway/src/create-deps";

// What a worker and a gateway write while their Redis is away for a few seconds, and when it is
// back: each of their connections says it went down once and came back once, whatever the count
// of reconnection attempts meanwhile, and nothing of it at error level.
jest.setTimeout(60_000);

// Debug included: what goes there is counted apart from what an operator reads.
const { logger, lines } = capturedLogger("debug");

let redis: PrivateRedis;
let worker: AgentWorker | undefined;
let closeGateway: (() => Promise<void>) | undefined;
const HOUR_MS = 3_600_000;

beforeAll(async () => {
  redis = await startPrivateRedis();
  const { databaseUrl, redisPrefix } = testEnv();
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, REDIS_PREFIX: `${redisPrefix}:outage-log`, INTERNAL_TOKEN: "test-internal-token-0123456789" };
  // No sweep within the test (their first comes a quarter of the stale age after the start): they
  // would act on other files' runs in the shared database.
  worker = await startAgentWorker(workerConfigSchema.parse({ ...env, WORKER_ID: "outage-log-worker", RUN_STALE_AFTER_MS: String(HOUR_MS), QUEUED_STALE_AFTER_MS: String(HOUR_MS), QUEUED_MAX_AGE_MS: String(2 * HOUR_MS) }), logger);
  closeGateway = createGatewayDeps(gatewayConfigSchema.parse(env), logger).close;
});

afterAll(async () => {
  await worker?.close(0);
  await closeGateway?.();
  await redis?.stop();
});

const CONNECTIONS = ["gateway:commands", "gateway:subscriber", "gateway:bullmq", "outage-log-worker:commands", "outage-log-worker:subscriber", "outage-log-worker:bullmq"];
const WARN = 40;

it("logs a Redis outage once per connection when it begins and once when it ends, with its duration, and nothing at error level", async () => {
  // Every connection ready before the outage.
  await new Promise((r) => setTimeout(r, 1500));
  const from = lines.length;
  await redis.stop();
  await new Promise((r) => setTimeout(r, 5000));
  await redis.start();
  // Until every connection said it is back, or long enough for all of them to be.
  await eventually(async () => lines.slice(from).filter((l) => l.msg === "redis reachable again").length >= CONNECTIONS.length, { timeoutMs: 10_000 }).catch(() => {});
  // Time for any late line of the outage.
  await new Promise((r) => setTimeout(r, 1000));
  const outage = lines.slice(from);

  const down = outage.filter((l) => l.msg === "redis unreachable: retrying until it is back");
  const back = outage.filter((l) => l.msg === "redis reachable again");
  // The counts first: one line per connection each way, the outage's warnings its down lines, no error.
  const counts = (ls: LogLine[]) => ({ down: down.length, back: back.length, warnings: ls.filter((l) => l.level === WARN).length, errors: ls.filter((l) => l.level >= 50).length });
  expect(counts(outage)).toEqual({ down: CONNECTIONS.length, back: CONNECTIONS.length, warnings: CONNECTIONS.length, errors: 0 });
  expect(down.map((l) => l.connection).sort()).toEqual([...CONNECTIONS].sort());
  for (const l of down) expect(l).toMatchObject({ level: WARN, err: expect.stringMatching(/ECONNREFUSED|closed/) });
  expect(back.map((l) => l.connection).sort()).toEqual([...CONNECTIONS].sort());
  // Down from the first failed attempt to reconnect (after the stop) until ready again.
  for (const l of back) expect(l).toMatchObject({ level: 30, downForMs: expect.any(Number) });
  for (const l of back) expect(l.downForMs).toBeGreaterThan(4000);
  // The outage's warnings are its down lines: no line per retry, of the connections or of BullMQ.
  expect(outage.filter((l) => l.level >= WARN && l.msg !== down[0]!.msg)).toEqual([]);
});
