import { createTenant, readSse, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { readDbEvents } from "@agentrun/events";

jest.setTimeout(120_000);

let stack: Stack;
let secondUrl: string;
let prisma: PrismaClient;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  ({ url: secondUrl } = await stack.addGateway());
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma);
});

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
});

it("lets a client whose gateway was killed re-attach through another gateway and receive every event exactly once", async () => {
  const first: any[] = [];
  const killed = readSse(`${stack.gatewayUrl}/api/run`, {
    body: { query: "[sleep:100][chunks:30] survive the gateway" },
    headers: tenant.headers,
    until: (e) => {
      first.push({ id: Number(e.id), ...e.data });
      return false;
    },
  }).catch((err: Error) => err);
  for (const deadline = Date.now() + 20_000; first.length < 5; await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() > deadline) throw new Error(`the stream brought ${first.length} events in 20 s (${JSON.stringify(await Promise.race([killed, null]))})`);
  }
  await stack.gateway.kill();
  // The connection breaks mid-stream (fetch reports "terminated"), it does not end normally.
  expect(await killed).toMatchObject({ name: "TypeError", message: "terminated" });

  const { run_id: runId, task_id: taskId } = first[0];
  const lastId = first.at(-1).id;
  const rest = await readSse(`${secondUrl}/api/tasks/${taskId}/runs/${runId}/events`, { headers: { ...tenant.headers, "last-event-id": String(lastId) } });
  expect(rest.status).toBe(200);
  const all = [...first.map((e) => e.id), ...rest.events.map((e) => Number(e.id))];
  expect(all).toEqual(all.map((_, i) => i + 1));
  expect(rest.events.at(-1)!.data.type).toBe("run_completed");
  const text = [...first, ...rest.events.map((e) => e.data)].filter((e) => e.type === "text_chunk").map((e) => e.content).join("");
  expect(text).toBe("Echo: survive the gateway");
  expect((await readDbEvents({ prisma }, runId)).map((e) => e.seq)).toEqual(all);
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId }, include: { task: true } });
  expect({ status: run.status, output: run.output, active: run.task.activeRunId }).toEqual({ status: "completed", output: "Echo: survive the gateway", active: null });
});
