import { Router } from "express";
import { runRequestSchema } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import { enqueueRun } from "@agentrun/queue";
import { followRun } from "@agentrun/events";
import { finishRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { createRun } from "../runs/create-run";
import { openSse } from "../runs/sse";
import { loadRunResult } from "../runs/run-result";

/** `POST /run`: starts a run and streams its events (SSE) or waits for its result (JSON). */
export function runRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, hub: deps.hub };

  router.post("/run", async (req, res) => {
    const auth = authOf(req);
    const body = runRequestSchema.parse(req.body ?? {});
    const { runId, taskId, started } = await createRun(deps.prisma, { auth, query: body.query, taskId: body.task_id, context: body.context });
    const log = req.log.child({ runId, taskId, orgId: auth.orgId });
    try {
      await enqueueRun(deps.queue, { runId });
    } catch (err) {
      log.error({ err }, "could not enqueue run");
      await finishRun(store, {
        runId,
        status: "failed",
        error: { code: "unavailable", message: "The run queue is unavailable." },
        messages: [{ role: "user", content: body.query }],
      }).catch((e) => log.error({ err: e }, "could not fail the unqueued run"));
      throw new AppError("unavailable", { message: "The run queue is unavailable; retry shortly.", cause: err });
    }

    if (body.stream) {
      const sse = openSse(req, res, deps.config.SSE_HEARTBEAT_MS);
      sse.send(started);
      try {
        await followRun({ ...store, runId, afterSeq: started.seq, onEvent: sse.send, signal: sse.signal });
      } catch (err) {
        // The run goes on; the client can re-attach through the events endpoint.
        log.error({ err }, "lost the run's event stream");
      }
      sse.end();
      return;
    }

    const wait = new AbortController();
    const timer = setTimeout(() => wait.abort(), deps.config.RUN_WAIT_TIMEOUT_MS);
    res.on("close", () => wait.abort());
    try {
      const terminal = await followRun({ ...store, runId, afterSeq: started.seq, onEvent: () => {}, signal: wait.signal });
      if (res.writableEnded || res.destroyed) return;
      if (!terminal) {
        // Past the wait limit: the run goes on; the caller polls the run or follows its events.
        const run = await deps.prisma.run.findUnique({ where: { id: runId }, select: { status: true } });
        res.status(202).json({ run_id: runId, task_id: taskId, status: run?.status ?? "queued" });
        return;
      }
      res.status(200).json(await loadRunResult(deps.prisma, runId));
    } finally {
      clearTimeout(timer);
    }
  });

  return router;
}
