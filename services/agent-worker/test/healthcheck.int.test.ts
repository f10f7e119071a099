import { execFile } from "node:child_process";
import { hostname } from "node:os";
import path from "node:path";
import { newWorkerId, recordWorkerHeartbeat, workersKey } from "@agentrun/events";
import { closeRedis, createRedis, Redis } from "@agentrun/redis";
import { testEnv } from "@agentrun/testing";

// The worker container's health check (docker-compose.yml), run as the container runs it.
const SCRIPT = path.join(__dirname, "../src/healthcheck.ts");
let redis: Redis;
let n = 0;
beforeAll(() => {
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
});
afterAll(() => closeRedis(redis));

function healthcheck(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", SCRIPT], { env: { PATH: process.env.PATH, REDIS_URL: testEnv().redisUrl, ...env }, timeout: 30_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

it("passes while this host's worker beats, and fails when only another host's does", async () => {
  const prefix = `${testEnv().redisPrefix}:healthcheck-${++n}`;
  await recordWorkerHeartbeat(redis, prefix, "other-host-1a2b3c4d");
  expect(await healthcheck({ REDIS_PREFIX: prefix })).toMatchObject({ code: 1, stderr: expect.stringContaining(`no fresh heartbeat of a worker of host ${hostname()}`) });
  // Another host whose name starts like this one's does not count either.
  await recordWorkerHeartbeat(redis, prefix, `${hostname()}-2-1a2b3c4d`);
  expect((await healthcheck({ REDIS_PREFIX: prefix })).code).toBe(1);
  await recordWorkerHeartbeat(redis, prefix, newWorkerId(hostname()));
  expect(await healthcheck({ REDIS_PREFIX: prefix })).toEqual({ code: 0, stderr: "" });
  // A configured WORKER_ID is looked up as it is.
  expect((await healthcheck({ REDIS_PREFIX: prefix, WORKER_ID: "worker-7" })).code).toBe(1);
  await recordWorkerHeartbeat(redis, prefix, "worker-7");
  expect((await healthcheck({ REDIS_PREFIX: prefix, WORKER_ID: "worker-7" })).code).toBe(0);
  await redis.del(workersKey(prefix));
}, 60_000);

it("fails, and says why, when Redis cannot be reached", async () => {
  const res = await healthcheck({ REDIS_URL: "redis://127.0.0.1:1", REDIS_PREFIX: "x" });
  expect(res.code).toBe(1);
  expect(res.stderr).toMatch(/health check failed/);
}, 60_000);
