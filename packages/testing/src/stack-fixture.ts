import Redis from "ioredis";
import type { PrismaClient } from "@agentrun/db";
import { testEnv } from "./env";
import { startPgRelay, type PgRelay } from "./pg-relay";
import { startStack, type Stack, type StackOptions } from "./stack";
import { createTenant, testPrisma, type Tenant, type TenantOptions } from "./tenant";

export interface StackWithTenant {
  stack: Stack;
  prisma: PrismaClient;
  tenant: Tenant;
  /** A connection to the stack's Redis, when asked for (`redis: true`). */
  redis?: Redis;
  /** The relay the gateway reaches PostgreSQL through, when asked for (`pgRelay: true`). */
  relay?: PgRelay;
}

/**
 * A test file's usual fixture: before its tests (`beforeAll`) starts a stack (with `pgRelay`, its
 * gateway behind a relay to PostgreSQL that can cut connections), opens the test database (and,
 * with `redis`, a connection to the stack's Redis) and creates a tenant, handing
 * them to `use`; after them (`afterAll`) stops the stack and closes the connections, whatever got
 * started.
 */
export function stackWithTenant(use: (started: StackWithTenant) => void, opts: { stack?: StackOptions; tenant?: TenantOptions; redis?: boolean; pgRelay?: boolean } = {}): void {
  const started: Partial<StackWithTenant> = {};
  beforeAll(async () => {
    let stackOpts = opts.stack;
    if (opts.pgRelay) {
      started.relay = await startPgRelay(testEnv().databaseUrl);
      stackOpts = { ...stackOpts, gatewayEnv: { ...stackOpts?.gatewayEnv, DATABASE_URL: started.relay.url } };
    }
    started.stack = await startStack(stackOpts);
    started.prisma = testPrisma(testEnv().databaseUrl);
    if (opts.redis) started.redis = new Redis(started.stack.env.REDIS_URL!);
    started.tenant = await createTenant(started.prisma, opts.tenant);
    use(started as StackWithTenant);
  });
  afterAll(async () => {
    await started.stack?.stop();
    await started.relay?.close();
    started.redis?.disconnect();
    await started.prisma?.$disconnect();
  });
}
