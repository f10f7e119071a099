import { Router } from "express";
import { idempotencyKeySchema, runRequestSchema } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import { enqueueRun } from "@agentrun/queue";
import { finishRun } from "@agentrun/run-state";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { createRun, newRunIds } from "../runs/create-run";
import { claimIdempotencyKey, releaseIdempotencyKey, requestHash, waitForRun } from "../runs/idempotency";
import { respondWithRun } from "../runs/respond-run";

/** `POST /run`: starts a run and streams its events (SSE) or waits for its result (JSON). */
export function runRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };

  router.post("/run", async (req, res) => {
    const auth = authOf(req);
    const body = runRequestSchema.parse(req.body ?? {});
    const keyHeader = req.get("idempotency-key");
    const key = keyHeader === undefined ? undefined : idempotencyKeySchema.safeParse(keyHeader);
    if (key && !key.success) throw new AppError("invalid_request", { message: "Idempotency-Key must be 1-255 printable ASCII characters without spaces." });
    const ids = newRunIds(body.task_id);

    if (key?.data) {
      const claim = await claimIdempotencyKey(deps.prisma, { orgId: auth.orgId, key: key.data, hash: requestHash(auth.agentId, body), ...ids });
      if (!claim.owner) {
        // The same request again: answer with the run the first one started.
        if (!(await waitForRun(deps.prisma, claim.runId))) throw new AppError("run_in_progress", { message: "A request with this Idempotency-Key is still being accepted; retry shortly." });
        await respondWithRun(deps, req, res, { runId: claim.runId, taskId: claim.taskId, stream: body.stream });
        return;
      }
    }

    let created;
    try {
      created = await createRun(deps.prisma, { auth, query: body.query, taskId: body.task_id, context: body.context, ids });
    } catch (err) {
      if (key?.data) await releaseIdempotencyKey(deps.prisma, auth.orgId, key.data, ids.runId).catch(() => {});
      throw err;
    }
    const { runId, taskId, started } = created;
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
    await respondWithRun(deps, req, res, { runId, taskId, stream: body.stream, sent: [started], fresh: true });
  });

  return router;
}
