import { Router } from "express";
import { readyCheck, schemaState } from "@agentrun/db";
import { countLiveWorkers } from "@agentrun/events";
import type { GatewayDeps } from "../deps";
import { isStopping } from "../shutdown";

/**
 * `/healthz`: the process lives. `/readyz`: the database answers with this code's migrations
 * applied, Redis answers, and at least one live worker (one that reaches its own database) is
 * heartbeating; 503 once the gateway is stopping.
 */
export function healthRoutes(deps: GatewayDeps, router: Router = Router()): Router {
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    // Out of the load balancer's rotation as soon as the stop begins.
    if (isStopping()) return void res.status(503).json({ error: { code: "unavailable", message: "Shutting down." } });
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
