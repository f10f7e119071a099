import express, { type Express } from "express";
import { watchDatabase, type PrismaClient } from "@agentrun/db";
import { ServerStop } from "@agentrun/express-server";
import { jsonBody } from "@agentrun/json-body";
import type { Logger } from "@agentrun/logger";
import { errorHandler, notFound } from "./middleware/error.middleware";
import { internalAuth } from "./middleware/internal-auth.middleware";
import { requestId } from "./middleware/request-id.middleware";
import { healthRouter } from "./routes/health.routes";
import { memoriesRouter } from "./routes/memories.routes";

/** Everything the memory service's routes use, created once in index.ts (or by a test). */
export interface MemoryAppDeps {
  prisma: PrismaClient;
  logger: Logger;
  /** The shared secret every `/internal` request must present. */
  internalToken: string;
  /** The service's stop, which index.ts begins at SIGTERM (a test's app is never stopping). */
  stop?: ServerStop;
}

/**
 * Largest accepted JSON body: a search query may be 32,000 characters, which JSON escaping can
 * grow several-fold.
 */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** Builds the memory service's Express app; no side effects, no `listen`. */
export function createApp({ prisma, logger, internalToken, stop = new ServerStop() }: MemoryAppDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);

  app.use(stop.closeConnections());
  app.use(requestId(logger));
  app.use(healthRouter({ prisma, stop }));
  // JSON bodies only, and no U+0000 in them or in the URL (PostgreSQL stores none): 400, not a 500.
  // Past the body, a request writes: the stop answers only those still waiting (see ServerStop).
  app.use("/internal", internalAuth(internalToken), jsonBody(BODY_LIMIT_BYTES), stop.acting());
  app.use("/internal/memories", memoriesRouter({ prisma }));
  app.use(notFound);
  // The database's outages are logged once each, with their end; a request answered 503 has it checked.
  watchDatabase(prisma, logger);
  app.use(errorHandler(logger, stop));
  return app;
}
