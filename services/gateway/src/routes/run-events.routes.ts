import { Router, type Request } from "express";
import Negotiator from "negotiator";
import { readStoredEvents } from "@agentrun/events";
import { AppError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { resumeAfter, streamRunEvents } from "../runs/run-events-stream";
import { cancelRun } from "../tasks/cancel-run";
import { ownedRun } from "../tasks/task-access";
import { toRunView } from "../views/run.view";
import { readsNoQuery } from "../middleware/strict-query";

/**
 * What the events endpoint answers in, by `Accept` (q-values and media parameters honoured): the
 * live framing is listed first, so it is the answer to a wildcard, to a tie and to no `Accept`.
 * A header that names neither with parameters we list (`application/json; version=1`) is decided
 * by its media types alone, most preferred first.
 */
const EVENT_FORMATS = ["text/event-stream", "application/json", "application/json; charset=utf-8"];
const BARE_FORMATS = new Map([
  ["text/event-stream", false],
  ["text/*", false],
  ["*/*", false],
  ["application/json", true],
  ["application/*", true],
]);
function wantsJson(req: Request): boolean {
  const chosen = req.accepts(EVENT_FORMATS);
  if (chosen) return chosen.startsWith("application/json");
  const types = new Negotiator(req).mediaTypes().map((t) => t.toLowerCase());
  return BARE_FORMATS.get(types.find((t) => BARE_FORMATS.has(t)) ?? "") ?? false;
}

/** Replaying and following a run's events, and cancelling a run. */
export function runEventsRoutes(deps: GatewayDeps, router: Router = Router()): Router {
  const { prisma } = deps;
  const store = { prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, hub: deps.hub };

  router.get("/tasks/:task_id/runs/:run_id/events", async (req, res) => {
    const afterSeq = resumeAfter(req);
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);

    if (wantsJson(req)) {
      res.json({ events: await readStoredEvents(store, run.id, afterSeq) });
      return;
    }
    await streamRunEvents(req, res, { store, run, afterSeq, heartbeatMs: deps.config.SSE_HEARTBEAT_MS });
  });

  router.post("/tasks/:task_id/runs/:run_id/cancel", async (req, res) => {
    readsNoQuery(req);
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    await cancelRun(store, run);
    // Gone when its task was deleted meanwhile.
    const current = await prisma.run.findUnique({ where: { id: run.id } });
    if (!current) throw new AppError("run_not_found", { message: `Task '${run.taskId}' has no run '${run.id}' any more.` });
    res.status(202).json(toRunView(current));
  });

  return router;
}
