import { readSse, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { UNPACED_TEXT_CHUNKS } from "../src/runs/text-pacer";

// A model that streams its answer in thousands of tiny chunks without pause: past the run's first
// pieces, its text goes out in fewer, larger text_chunk events, none of it lost or reordered.

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, memory: false } });

const PIECES = 5000;

it("a flood of tiny chunks streams as at most a thousand events and a few paced ones, the text whole and in order", async () => {
  const words = Array.from({ length: 1200 }, (_, i) => `w${i}`).join(" ");
  const res = await readSse(`${stack.gatewayUrl}/api/run`, { body: { query: `[chunks:${PIECES}] ${words}` }, headers: tenant.headers });
  const events = res.events.map((e) => e.data);
  expect(events.at(-1)).toMatchObject({ type: "run_completed" });
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  const chunks = events.filter((e) => e.type === "text_chunk").map((e) => e.content as string);
  // Each of the first thousand pieces is an event; the thousands after them are paced.
  expect(chunks.length).toBeGreaterThan(UNPACED_TEXT_CHUNKS);
  expect(chunks.length).toBeLessThan(PIECES / 2);
  const text = chunks.join("");
  expect(text).toContain(words);

  const runId = events[0]!.run_id as string;
  const run = await prisma.run.findUniqueOrThrow({ where: { id: runId } });
  expect(run).toMatchObject({ status: "completed", output: text });
  // A reader replaying the run gets the same events.
  const taskId = events[0]!.task_id as string;
  const replay = await fetch(`${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/events`, { headers: { ...tenant.headers, accept: "application/json" } });
  expect(((await replay.json()) as { events: unknown[] }).events).toEqual(events);
});
