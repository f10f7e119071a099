import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { once } from "node:events";
import { loadConfig, onStopRequest, runMain, settingsForLog } from "@agentrun/config";
import { createPrisma, warmUp } from "@agentrun/db";
import { answerMalformedRequests, appMessageClasses, continueWithinLimit, drainServer, ServerStop } from "@agentrun/express-server";
import { createLogger } from "@agentrun/logger";
import { BODY_LIMIT_BYTES, createApp } from "./app";
import { memoryConfigSchema, startupWarnings } from "./config";

/** How long open connections may finish after a shutdown signal before they are cut. */
const SHUTDOWN_GRACE_MS = 10_000;

runMain(async () => {
  const config = loadConfig(memoryConfigSchema);
  const port = config.MEMORY_PORT ?? config.PORT;
  const logger = createLogger({ service: "memory", level: config.LOG_LEVEL, secrets: [config.INTERNAL_TOKEN] });
  for (const warning of startupWarnings(config)) logger.warn(warning);
  const prisma = createPrisma({
    databaseUrl: config.DATABASE_URL,
    poolSize: config.DB_POOL_SIZE,
    preparedStatements: config.DB_PREPARED_STATEMENTS,
    queryTimeoutMs: config.DB_QUERY_TIMEOUT_MS,
    onPoolError: (err) => logger.warn({ err }, "idle database connection failed"),
  });

  warmUp(prisma);
  const stop = new ServerStop();
  const app = createApp({ prisma, logger, internalToken: config.INTERNAL_TOKEN, stop });
  const server = createServer(appMessageClasses(app), app);
  // As the gateway's server: what Node's parser refuses is answered in the contract's shape, with
  // a request id of the kind the app makes (a UUID), logged with its status (the app's access
  // line never sees such a request), and a body declared over the limit gets no 100 Continue.
  answerMalformedRequests(server, randomUUID, logger);
  continueWithinLimit(server, BODY_LIMIT_BYTES);
  // A port in use rejects here, so runMain reports it as one line.
  server.listen(port, config.MEMORY_HOST);
  await once(server, "listening");
  logger.info({ port, host: config.MEMORY_HOST ?? "every interface", settings: settingsForLog(config) }, "memory service listening");

  // A second request changes nothing: open connections are cut at SHUTDOWN_GRACE_MS anyway, and
  // a process manager or a terminal may send the same request twice.
  const shutdown = async (signal: string): Promise<void> => {
    if (stop.isStopping()) {
      logger.info({ signal }, "already shutting down");
      return;
    }
    logger.info({ signal }, "shutting down");
    // From now on /readyz answers 503 and every answer closes its connection; requests being
    // handled finish within the grace, and no new one is taken.
    stop.begin();
    // Requests still waiting for their body at the grace's end are answered 503, not cut.
    await drainServer(server, { graceMs: SHUTDOWN_GRACE_MS, beforeCut: async () => void (await stop.answerWaiting()) });
    await prisma.$disconnect();
    logger.info("stopped");
    process.exit(0);
  };
  onStopRequest((reason) => {
    shutdown(reason).catch((err: unknown) => {
      logger.error({ err }, "shutdown failed");
      process.exit(1);
    });
  });
});
