import { Router } from "express";
import { schemaState } from "@agentrun/db";
import { countLiveWorkers } from "@agentrun/events";
import type { GatewayDeps } from "../deps";

const withTimeout = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error("timeout")), ms).unref())]);

/** Longest wait for each readiness check: a probe gets its answer within a second (Kubernetes' default probe timeout). */
const CHECK_TIMEOUT_MS = 900;

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
      withTimeout(schemaState(deps.prisma), CHECK_TIMEOUT_MS),
      withTimeout(deps.redis.ping(), CHECK_TIMEOUT_MS),
      withTimeout(countLiveWorkers(deps.redis, deps.config.REDIS_PREFIX), CHECK_TIMEOUT_MS),
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
