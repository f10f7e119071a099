import { createPrisma, newId, type Plan, type PrismaClient } from "@agentrun/db";
import { generateApiKey } from "@agentrun/api-keys";
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

/** A Prisma client on the test database. */
export function testPrisma(databaseUrl: string): PrismaClient {
  return createPrisma({ databaseUrl, poolSize: 5 });
}
