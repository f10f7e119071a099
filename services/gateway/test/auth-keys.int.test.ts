import { createTenant, eventually, startStack, testEnv, testPrisma, type Stack } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// Two gateway processes with the default key cache TTL (900 ms); key use is written every 300 ms.
const FLUSH_MS = 300;
let stack: Stack;
let secondUrl: string;
let prisma: PrismaClient;

beforeAll(async () => {
  stack = await startStack({ workers: 0, memory: false, gatewayEnv: { KEY_LAST_USED_FLUSH_MS: String(FLUSH_MS), AUTH_FAILURE_LIMIT: "100000" } });
  ({ url: secondUrl } = await stack.addGateway({ AUTH_FAILURE_LIMIT: "100000" }));
  prisma = testPrisma(testEnv().databaseUrl);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const status = (base: string, headers: Record<string, string>) => fetch(`${base}/api/tasks`, { headers }).then(async (r) => (await r.arrayBuffer(), r.status));

it("records last_used_at in batches, not with a write per request", async () => {
  const t = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000 });
  const lastUsed = async () => (await prisma.apiKey.findUniqueOrThrow({ where: { id: t.keyId } })).lastUsedAt?.getTime() ?? null;
  expect(await lastUsed()).toBeNull();

  // Requests for 2 s; after each, note the stored value.
  const seen = new Set<number>();
  const t0 = Date.now();
  let requests = 0;
  let lastSentAt = 0;
  let lastAnsweredAt = 0;
  while (Date.now() - t0 < 2000) {
    lastSentAt = Date.now();
    expect(await status(stack.gatewayUrl, t.headers)).toBe(200);
    lastAnsweredAt = Date.now();
    requests++;
    const v = await lastUsed();
    if (v !== null) seen.add(v);
  }
  const elapsed = Date.now() - t0;
  // At most one write per flush interval (plus one at the edge), far fewer than requests.
  const maxWrites = Math.ceil(elapsed / FLUSH_MS) + 1;
  expect(seen.size).toBeGreaterThanOrEqual(1);
  expect(seen.size).toBeLessThanOrEqual(maxWrites);
  expect(requests).toBeGreaterThan(2 * maxWrites);

  // Once the requests stop, the last one is recorded: the time of that request itself (after
  // it was sent, before its answer came), not of the flush that wrote it.
  const final = await eventually(async () => {
    const v = await lastUsed();
    return v !== null && v >= lastSentAt ? v : null;
  });
  expect(final).toBeLessThanOrEqual(lastAnsweredAt);
});

it("stops accepting a revoked key within 1 second on every instance", async () => {
  const t = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000 });
  const instances = [stack.gatewayUrl, secondUrl];
  // Both instances have the key cached as valid.
  for (const base of instances) expect(await status(base, t.headers)).toBe(200);

  await prisma.apiKey.update({ where: { id: t.keyId }, data: { revokedAt: new Date() } });
  const revokedAt = Date.now();
  // When each instance last accepted the key, counted from when that request was sent: a request
  // sent more than a second after the revocation committed must be refused, however slow the
  // answer, since the gateway reads the key after the request was sent.
  const lastAcceptedSent = await Promise.all(
    instances.map(async (base) => {
      let accepted = -Infinity;
      for (;;) {
        const sentAt = Date.now();
        const s = await status(base, t.headers);
        if (s === 401) return accepted;
        expect(s).toBe(200);
        accepted = sentAt - revokedAt;
        if (Date.now() - revokedAt > 5000) throw new Error(`${base} still accepts the revoked key`);
        await sleep(10);
      }
    }),
  );
  for (const ms of lastAcceptedSent) expect(ms).toBeLessThanOrEqual(1000);
  // And it stays refused.
  for (const base of instances) for (let i = 0; i < 5; i++) expect(await status(base, t.headers)).toBe(401);
});
