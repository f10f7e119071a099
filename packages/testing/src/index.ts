/** Test helpers: the run's database and Redis prefix, tenants, the real services as processes, an SSE reader. */
export { testEnv, type TestEnv } from "./env";
export { createLargeFinishedRun, createTestRun, createTenant, createWidgetKey, loseClaim, testPrisma, type Tenant, type TenantOptions } from "./tenant";
export { startStack, type Stack, type StackOptions } from "./stack";
export { stackWithTenant, type StackWithTenant } from "./stack-fixture";
export { testStores, type TestStores } from "./stores-fixture";
export { capturedLogger } from "./captured-logger";
export { freePort, logLinesOf, startService, waitForOk, type LogLine, type ServiceProcess } from "./processes";
export { reachableAddresses } from "./listen-host";
export { apiJson, postRun, runJson } from "./runs";
export { readSse, type SseEvent, type SseResponse, type StreamOptions } from "./sse-client";
export { startPrivateRedis, startPrivatePostgres, type PrivateRedis, type PrivatePostgres } from "./private-servers";
export { startMemoryService, type MemoryService } from "./memory-service";
export { startPgRelay, type PgRelay } from "./pg-relay";
export { startTcpRelay, type TcpRelay } from "./tcp-relay";
export { startStackOnPrivatePostgres, type PrivatePostgresStack } from "./private-stack";
export { eventually, watchSse, within, type SseWatch } from "./waiting";
export { rawExchange, rawHead, rawJsonAnswer } from "./raw-http";
