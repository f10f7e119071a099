import { createPrisma, newId, type Plan, type PrismaClient } from "@agentrun/db";
import { generateApiKey, generateWidgetKey } from "@agentrun/api-keys";
import { grantCredits } from "@agentrun/credits";

export interface TenantOptions {
  plan?: Plan;
  rpmLimit?: number;
  credits?: number;
  instructions?: string;
  tools?: string[];
  maxSteps?: number;
  httpAllowlist?: string[];
  pricing?: object;
}

export interface Tenant {
  orgId: string;
  agentId: string;
  apiKey: string;
  keyId: string;
  /** Headers that authenticate as this tenant's key and agent. */
  headers: Record<string, string>;
}

/** Creates an organization with credits, an API key and an agent, with unique ids. */
export async function createTenant(prisma: PrismaClient, opts: TenantOptions = {}): Promise<Tenant> {
  const orgId = newId("org");
  await prisma.organization.create({ data: { id: orgId, name: `test ${orgId}`, plan: opts.plan ?? "pro", rpmLimit: opts.rpmLimit } });
  if ((opts.credits ?? 1000) > 0) await grantCredits(prisma, orgId, opts.credits ?? 1000);
  const key = generateApiKey();
  const keyId = newId("key");
  await prisma.apiKey.create({ data: { id: keyId, orgId, prefix: key.prefix, keyHash: key.keyHash, name: "test" } });
  const agentId = newId("agt");
  await prisma.agent.create({
    data: {
      id: agentId,
      orgId,
      name: "test agent",
      model: "scripted",
      instructions: opts.instructions ?? "",
      tools: opts.tools ?? ["memory", "calc", "clock", "http"],
      maxSteps: opts.maxSteps ?? 8,
      httpAllowlist: opts.httpAllowlist ?? [],
      pricing: opts.pricing,
    },
  });
  return { orgId, agentId, apiKey: key.apiKey, keyId, headers: { authorization: `Bearer ${key.apiKey}`, "x-agent-id": agentId } };
}

/** A new publishable widget key (`pk_…`) of `agentId`, usable from `allowedOrigins`. */
export async function createWidgetKey(prisma: PrismaClient, agentId: string, allowedOrigins: string[]): Promise<string> {
  const key = generateWidgetKey();
  await prisma.widgetKey.create({ data: { id: newId("wk"), agentId, key, allowedOrigins } });
  return key;
}

/** A Prisma client on the test database. */
export function testPrisma(databaseUrl: string): PrismaClient {
  return createPrisma({ databaseUrl, poolSize: 5 });
}

/**
 * A run of a new tenant that holds its task, `running` as its worker has it (or still `queued`),
 * with run_started (seq 1) stored. No credits are reserved. Returns the run's id.
 */
export async function createTestRun(prisma: PrismaClient, status: "queued" | "running" = "running"): Promise<string> {
  const t = await createTenant(prisma);
  const taskId = newId("task");
  const runId = newId("run");
  await prisma.task.create({ data: { id: taskId, orgId: t.orgId, agentId: t.agentId, title: "t", activeRunId: runId, runCount: 1 } });
  const started = { seq: 1, type: "run_started", run_id: runId, task_id: taskId };
  await prisma.run.create({
    data: { id: runId, taskId, orgId: t.orgId, agentId: t.agentId, query: "q", status, lastSeq: 1, creditsReserved: 0, events: { create: { firstSeq: 1, lastSeq: 1, events: [started] } } },
  });
  return runId;
}

/**
 * What PostgreSQL's recovery leaves when a run's claim (which commits asynchronously) had not
 * reached the disk: the run queued without a worker, the new task it started pending again. Its
 * worker, if alive, goes on.
 */
export async function loseClaim(prisma: PrismaClient, runId: string): Promise<void> {
  await prisma.$transaction([
    prisma.$executeRaw`UPDATE tasks SET status = 'pending' WHERE id = (SELECT task_id FROM runs WHERE id = ${runId})`,
    prisma.$executeRaw`UPDATE runs SET status = 'queued', worker_id = NULL, started_at = NULL WHERE id = ${runId}`,
  ]);
}

/**
 * A finished run of `tenant` whose events are `toolResults` tool results of `resultBytes` each
 * (between run_started and run_completed), stored in PostgreSQL: a large answer for tests of
 * clients that read it slowly or not at all. Returns its events path and its event count.
 */
export async function createLargeFinishedRun(prisma: PrismaClient, tenant: Tenant, toolResults: number, resultBytes: number): Promise<{ path: string; eventCount: number }> {
  const taskId = newId("task");
  const runId = newId("run");
  const eventCount = toolResults + 2;
  const events = [
    { seq: 1, type: "run_started", run_id: runId, task_id: taskId },
    ...Array.from({ length: toolResults }, (_, i) => ({ seq: i + 2, type: "tool_result", run_id: runId, tool: "http", action: "get", result: `${i}:`.padEnd(resultBytes, "x") })),
    { seq: eventCount, type: "run_completed", run_id: runId, credits_used: 1, duration_ms: 5 },
  ];
  await prisma.task.create({ data: { id: taskId, orgId: tenant.orgId, agentId: tenant.agentId, title: "t", status: "completed", runCount: 1 } });
  await prisma.run.create({
    data: { id: runId, taskId, orgId: tenant.orgId, agentId: tenant.agentId, query: "q", status: "completed", lastSeq: eventCount, events: { create: { firstSeq: 1, lastSeq: eventCount, events } } },
  });
  return { path: `/api/tasks/${taskId}/runs/${runId}/events`, eventCount };
}
