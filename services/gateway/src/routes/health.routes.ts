import { Router } from "express";
import { WORKER_HEARTBEAT_STALE_MS, workersKey } from "@agentrun/events";
import type { GatewayDeps } from "../deps";

const withTimeout = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error("timeout")), ms).unref())]);

/** `/healthz`: the process lives. `/readyz`: database, Redis and at least one live worker answer. */
export function healthRoutes(deps: GatewayDeps): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const checks = await Promise.allSettled([
      withTimeout(deps.prisma.$queryRaw`SELECT 1`, 2000),
      withTimeout(deps.redis.ping(), 2000),
      withTimeout(deps.redis.zcount(workersKey(deps.config.REDIS_PREFIX), Date.now() - WORKER_HEARTBEAT_STALE_MS, "+inf"), 2000),
    ]);
    const [db, redis, workers] = checks;
    const liveWorkers = workers.status === "fulfilled" ? Number(workers.value) : 0;
    const status = {
      database: db.status === "fulfilled" ? "ok" : "unavailable",
      redis: redis.status === "fulfilled" ? "ok" : "unavailable",
      workers: liveWorkers,
    };
    const ready = status.database === "ok" && status.redis === "ok" && liveWorkers > 0;
    if (ready) res.json({ status: "ready", checks: status });
    else res.status(503).json({ error: { code: "unavailable", message: "Not ready.", details: status } });
  });
  return router;
}
