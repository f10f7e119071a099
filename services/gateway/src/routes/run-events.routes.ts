import { Router, type Request } from "express";
import Negotiator from "negotiator";
import { AppError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { listRunEvents, resumeAfter, streamRunEvents } from "../runs/run-events-stream";
import { cancelRun } from "../tasks/cancel-run";
import { ownedRun } from "../tasks/task-access";
import { toRunView } from "../views/run.view";
import { readsNoQuery, takesNoBody } from "../middleware/strict-query";
import { paceAnswer } from "../runs/stalled-client";

/**
 * What the events endpoint answers in, by `Accept`: its media types and their q-values decide,
 * other parameters are left out (`application/json; version=1` is JSON, as is
 * `application/json; charset=utf-8`). Negotiator prefers the higher q-value, then the more
 * specific range, then the client's order; the live framing is listed first, so it is the answer
 * to a wildcard, to a type that is neither and to no `Accept`.
 */
const EVENT_FORMATS = ["text/event-stream", "application/json"];
function wantsJson(req: Request): boolean {
  const accept = req.headers.accept;
  if (!accept) return false;
  return new Negotiator({ headers: { accept: withoutMediaParameters(accept) } }).mediaType(EVENT_FORMATS) === "application/json";
}

/** `accept` with each media range's parameters left out but its q-value. */
function withoutMediaParameters(accept: string): string {
  return accept
    .split(",")
    .map((range) => {
      const [type = "", ...params] = range.split(";");
      const q = params.find((p) => /^\s*q\s*=/i.test(p));
      return q ? `${type.trim()};${q.trim()}` : type.trim();
    })
    .join(",");
}

/** Replaying and following a run's events, and cancelling a run. */
export function runEventsRoutes(deps: GatewayDeps, router: Router = Router()): Router {
  const { prisma } = deps;
  const store = { prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, hub: deps.hub };

  router.get("/tasks/:task_id/runs/:run_id/events", async (req, res) => {
    // A run's events in JSON can be many megabytes (an event stream watches its client itself).
    paceAnswer(req, res);
    takesNoBody(req);
    const afterSeq = resumeAfter(req);
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    // The same URL answers in either format: a cache must key its copies by Accept.
    res.vary("Accept");
    if (wantsJson(req)) {
      res.json({ events: await listRunEvents(store, run, afterSeq) });
      return;
    }
    await streamRunEvents(req, res, { store, run, afterSeq, heartbeatMs: deps.config.SSE_HEARTBEAT_MS });
  });

  router.get("/tasks/:task_id/runs/:run_id", async (req, res) => {
    // A run's output can be many megabytes.
    paceAnswer(req, res);
    readsNoQuery(req);
    takesNoBody(req);
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    res.json(toRunView(run));
  });

  router.post("/tasks/:task_id/runs/:run_id/cancel", async (req, res) => {
    readsNoQuery(req);
    takesNoBody(req);
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    await cancelRun(store, run);
    // Gone when its task was deleted meanwhile.
    const current = await prisma.run.findUnique({ where: { id: run.id } });
    if (!current) throw new AppError("run_not_found", { message: `Task '${run.taskId}' has no run '${run.id}' any more.` });
    res.status(202).json(toRunView(current));
  });

  return router;
}
