import type { PrismaClient } from "@agentrun/db";
import { testEnv } from "./env";
import { startStack, type Stack, type StackOptions } from "./stack";
import { createTenant, testPrisma, type Tenant, type TenantOptions } from "./tenant";

export interface StackWithTenant {
  stack: Stack;
  prisma: PrismaClient;
  tenant: Tenant;
}

/**
 * A test file's usual fixture: before its tests (`beforeAll`) starts a stack, opens the test
 * database and creates a tenant, handing the three to `use`; after them (`afterAll`) stops the
 * stack and closes the database, whatever got started.
 */
export function stackWithTenant(use: (started: StackWithTenant) => void, opts: { stack?: StackOptions; tenant?: TenantOptions } = {}): void {
  const started: Partial<StackWithTenant> = {};
  beforeAll(async () => {
    started.stack = await startStack(opts.stack);
    started.prisma = testPrisma(testEnv().databaseUrl);
    started.tenant = await createTenant(started.prisma, opts.tenant);
    use(started as StackWithTenant);
  });
  afterAll(async () => {
    await started.stack?.stop();
    await started.prisma?.$disconnect();
  });
}
