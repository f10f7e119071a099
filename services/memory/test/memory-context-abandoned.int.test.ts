import { createHash, randomUUID } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { Prisma } from "@agentrun/db";
import { capturedLogger } from "@agentrun/testing";
import { createApp } from "../src/app";
import { AUTH, TOKEN, newScope, memoryAppForFile } from "./memory-app.fixture";

// A prompt's choice of memories reads the user's newest entries page after page. A caller that
// gave up (its timeout) must not keep the service reading them for nobody.

const t = memoryAppForFile();
let server: Server;
/** The service's logger, and the lines it wrote. */
const { logger, lines: logged } = capturedLogger("info");

beforeAll(async () => {
  server = createServer(createApp({ prisma: t.prisma, logger, internalToken: TOKEN })).listen(0, "127.0.0.1");
  await once(server, "listening");
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const isListPage = (query: unknown) => /FROM memory_entries[\s\S]*ORDER BY created_at DESC, id DESC/.test((query as Prisma.Sql).sql ?? "");

it("reads no further page once the caller of /context has gone", async () => {
  const scope = newScope();
  // 500 entries, each longer than the budget: none is taken, so the choice would read every page.
  const t0 = Date.now() - 1_000_000;
  await t.prisma.memoryEntry.createMany({
    data: Array.from({ length: 500 }, (_, k) => {
      const content = `entry ${k} ${"x".repeat(300)}`;
      return { id: `mem_${randomUUID()}`, orgId: scope.org_id, agentId: scope.agent_id, userId: "u", content, contentHash: createHash("sha256").update(content).digest("hex"), createdAt: new Date(t0 + k * 1000) };
    }),
  });

  const queryRaw = t.prisma.$queryRaw.bind(t.prisma);
  let pages = 0;
  let client: ReturnType<typeof request> | undefined;
  const spy = jest.spyOn(t.prisma, "$queryRaw").mockImplementation((async (query: Prisma.Sql, ...values: unknown[]) => {
    if (isListPage(query) && ++pages === 1) {
      // The caller gives up while the first page is being read.
      client!.destroy();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return queryRaw(query, ...values);
  }) as never);
  try {
    const { port } = server.address() as AddressInfo;
    client = request({ host: "127.0.0.1", port, method: "POST", path: "/internal/memories/context", headers: { ...AUTH, "content-type": "application/json" } });
    client.on("error", () => {});
    client.end(JSON.stringify({ ...scope, user_id: "u", query: "entry", max_count: 5, max_chars: 100 }));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(pages).toBe(1);
    // Logged all the same, as abandoned.
    const abandoned = logged.filter((line) => line.abandoned);
    expect(abandoned).toEqual([expect.objectContaining({ msg: "request", path: "/internal/memories/context" })]);
    // No answer was sent: no status either.
    expect(abandoned[0]).not.toHaveProperty("status");
  } finally {
    spy.mockRestore();
  }

  // The same request, kept, reads every page: the budget takes none of the entries.
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/internal/memories/context`, {
    method: "POST",
    headers: { ...AUTH, "content-type": "application/json" },
    body: JSON.stringify({ ...scope, user_id: "u", query: "entry", max_count: 5, max_chars: 100 }),
  });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ memories: [] });
});
