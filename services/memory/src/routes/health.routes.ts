import { Router } from "express";
import type { PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";

/**
 * `/healthz` answers while the process lives; `/readyz` only while PostgreSQL answers, so a
 * load balancer stops sending traffic during an outage. Neither needs the internal token.
 */
export function healthRouter({ prisma }: { prisma: PrismaClient }): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    try {
      await prisma.$queryRaw`SELECT 1`;
    } catch (err) {
      throw new AppError("unavailable", { message: "The database is unavailable.", cause: err });
    }
    res.json({ status: "ok" });
  });
  return router;
}
