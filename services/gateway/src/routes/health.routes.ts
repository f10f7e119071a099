import { Router } from "express";
import { readyCheck, schemaState } from "@agentrun/db";
import { countLiveWorkers } from "@agentrun/events";
import type { GatewayDeps } from "../deps";

/**
 * `/healthz`: the process lives. `/readyz`: the database answers with this code's migrations
 * applied, Redis answers, and at least one live worker (one that reaches its own database) is
 * heartbeating.
 */
export function healthRoutes(deps: GatewayDeps, router: Router = Router()): Router {
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const checks = await Promise.allSettled([
      readyCheck(schemaState(deps.prisma)),
      readyCheck(deps.redis.ping()),
      readyCheck(countLiveWorkers(deps.redis, deps.config.REDIS_PREFIX)),
    ]);
    const [db, redis, workers] = checks;
    const liveWorkers = workers.status === "fulfilled" ? workers.value : 0;
    const status = {
      database: db.status === "fulfilled" ? db.value : "unavailable",
      redis: redis.status === "fulfilled" ? "ok" : "unavailable",
      workers: liveWorkers,
    };
    const ready = status.database === "ok" && status.redis === "ok" && liveWorkers > 0;
    if (ready) res.json({ status: "ready", checks: status });
    else res.status(503).json({ error: { code: "unavailable", message: "Not ready.", details: status } });
  });
  return router;
}
