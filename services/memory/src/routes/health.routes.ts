import { Router } from "express";
import { readyCheck, schemaState, type PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import type { ServerStop } from "@agentrun/express-server";

/**
 * `/healthz` answers while the process lives; `/readyz` only while PostgreSQL answers with this
 * code's migrations applied, so a load balancer stops sending traffic during an outage, and a
 * service started before its migrations is not taken for ready, within READY_CHECK_TIMEOUT_MS
 * even when the database stops answering, and 503 from SIGTERM on. Neither needs the internal token.
 */
export function healthRouter({ prisma, stop }: { prisma: PrismaClient; stop: ServerStop }): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    // Out of the load balancer's rotation as soon as the stop begins.
    if (stop.isStopping()) throw new AppError("unavailable", { message: "Shutting down." });
    let database: Awaited<ReturnType<typeof schemaState>>;
    try {
      database = await readyCheck(schemaState(prisma));
    } catch (err) {
      throw new AppError("unavailable", { message: "The database is unavailable.", cause: err, details: { database: "unavailable" } });
    }
    if (database !== "ok") throw new AppError("unavailable", { message: "The database is not migrated (run npm run db:migrate:deploy).", details: { database } });
    res.json({ status: "ok" });
  });
  return router;
}
