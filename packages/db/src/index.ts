/**
 * The only package that touches the Prisma client: the client factory, generated model types,
 * id generation and database lifecycle helpers.
 */
export { createPrisma, warmUp, type CreatePrismaOptions, type PrismaClient } from "./client";
export { Prisma } from "./generated/prisma/client";
export type { Organization, ApiKey, Agent, WidgetKey, Task, Run, RunEventBatch, Message, MemoryEntry, CreditLedgerEntry, IdempotencyKey } from "./generated/prisma/client";
export * from "./generated/prisma/enums";
export { newId, type IdPrefix } from "./ids";
export { isStorableText, nestsDeeperThan, storableJson, storableJsonText, storableText } from "./storable";
export { withSessionSettings } from "./session-options";
export { ensureDatabase, dropDatabase, migrateDeploy, REPO_ROOT } from "./database";
export { latestMigration, readyCheck, READY_CHECK_TIMEOUT_MS, SCHEMA_CHECK_REUSE_MS, schemaState, type SchemaState } from "./schema-state";
export { DATABASE_RECHECK_MS, DatabaseWatch, suspectDatabaseOutage, watchDatabase, type DatabaseWatchLogger } from "./database-watch";
