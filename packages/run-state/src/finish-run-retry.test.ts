import pg from "pg";
import { type PrismaClient } from "@agentrun/db";
import { createRedis, Redis } from "@agentrun/redis";
import { RunEventWriter } from "@agentrun/events";
import { isUnavailableError } from "@agentrun/errors";
import { createTestRun, testEnv, testPrisma } from "@agentrun/testing";
import { finishRun } from "./finish-run";

// A worker's end retried while PostgreSQL refuses new connections ("too many clients"): the end
// waits for a connection instead of failing the run. The limit is a real one, a role's
// CONNECTION LIMIT, reached by a connection the test holds.
let prisma: PrismaClient;
let redis: Redis;
const redisPrefix = `${testEnv().redisPrefix}:finish-retry`;
const role = `agentrun_limited_${process.pid}_${Date.now().toString(36)}`;

/** The test database's URL as `role`. */
function urlAs(user: string): string {
  const url = new URL(testEnv().databaseUrl);
  url.username = user;
  url.password = "";
  return url.toString();
}

beforeAll(async () => {
  prisma = testPrisma(testEnv().databaseUrl);
  redis = createRedis({ url: testEnv().redisUrl, role: "commands" });
  await prisma.$executeRawUnsafe(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
  await prisma.$executeRawUnsafe(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
  await prisma.$executeRawUnsafe(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
});
afterAll(async () => {
  await prisma.$executeRawUnsafe(`DROP OWNED BY ${role}`);
  await prisma.$executeRawUnsafe(`DROP ROLE ${role}`);
  redis.disconnect();
  await prisma.$disconnect();
});

it("takes PostgreSQL's too many connections for an outage, and the worker's end waits it out", async () => {
  const runId = await createTestRun(prisma);
  await prisma.run.update({ where: { id: runId }, data: { workerId: "w1" } });
  const limited = testPrisma(urlAs(role));
  // The role's only connection, held by someone else.
  const holder = new pg.Client({ connectionString: urlAs(role) });
  await holder.connect();
  try {
    // Raw statements report PostgreSQL's SQLSTATE 53300; model queries Prisma's P2037.
    const refusals = await Promise.all([limited.$queryRaw`SELECT 1`, limited.run.findFirst()].map((q) => q.then(() => null, (err: unknown) => err)));
    expect(refusals).toEqual([expect.objectContaining({ code: "P2010" }), expect.objectContaining({ code: "P2037" })]);
    expect(String(refusals[0])).toContain("too many connections");
    for (const err of refusals) expect(isUnavailableError(err)).toBe(true);

    const writer = new RunEventWriter({ prisma: limited, redis, redisPrefix, runId, lastSeq: 1, writerId: "w1", flushIntervalMs: 600_000 });
    writer.emit({ type: "text_chunk", content: "done" });
    const ending = finishRun({ prisma: limited, redis, redisPrefix }, { runId, status: "completed", output: "done", messages: [], writer, retryForMs: 20_000 });
    await new Promise((r) => setTimeout(r, 500));
    await holder.end();
    expect(await ending).toMatchObject({ type: "run_completed", seq: 3 });
  } finally {
    await holder.end().catch(() => {});
    await limited.$disconnect();
  }
  expect(await prisma.run.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", output: "done" });
}, 40_000);
