import { Router } from "express";
import { eventsQuerySchema, lastEventIdSchema, isTerminalEvent } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import { followRun, readStoredEvents } from "@agentrun/events";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { openSse } from "../runs/sse";
import { cancelRun } from "../tasks/cancel-run";
import { ownedRun } from "../tasks/task-access";
import { toRunView } from "../views/run.view";

/** Replaying and following a run's events, and cancelling a run. */
export function runEventsRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const { prisma } = deps;
  const store = { prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };

  router.get("/tasks/:task_id/runs/:run_id/events", async (req, res) => {
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    const header = req.get("last-event-id");
    const parsed = header === undefined ? undefined : lastEventIdSchema.safeParse(header.trim());
    if (parsed && !parsed.success) throw new AppError("invalid_request", { message: "Last-Event-ID must be a non-negative integer (an event's seq)." });
    const afterSeq = parsed?.data ?? eventsQuerySchema.parse(req.query).after;

    if (req.accepts(["text/event-stream", "application/json"]) === "application/json" && !req.get("accept")?.includes("text/event-stream")) {
      res.json({ events: await readStoredEvents(store, run.id, afterSeq) });
      return;
    }
    const sse = openSse(req, res, deps.config.SSE_HEARTBEAT_MS);
    try {
      // A finished run is replayed from the store; a run in progress is followed to its end.
      const stored = run.status === "queued" || run.status === "running" ? null : await readStoredEvents(store, run.id, afterSeq);
      if (stored && (stored.length === 0 || isTerminalEvent(stored.at(-1)!))) for (const e of stored) sse.send(e);
      else await followRun({ ...store, hub: deps.hub, runId: run.id, afterSeq, onEvent: sse.send, signal: sse.signal });
    } catch (err) {
      req.log.error({ err, runId: run.id }, "lost the run's event stream");
    }
    sse.end();
  });

  router.post("/tasks/:task_id/runs/:run_id/cancel", async (req, res) => {
    const { run } = await ownedRun(prisma, authOf(req), req.params.task_id, req.params.run_id);
    await cancelRun(store, run);
    const current = await prisma.run.findUniqueOrThrow({ where: { id: run.id } });
    res.status(202).json(toRunView(current));
  });

  return router;
}
