import { Router } from "express";
import { runRequestSchema } from "@agentrun/contracts";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { createRun, newRunIds } from "../runs/create-run";
import { startRun } from "../runs/start-run";
import { claimKeyForRun, idempotencyKeyOf, releaseIdempotencyKey, requestHash } from "../runs/idempotency";
import { respondWithRun } from "../runs/respond-run";
import { readsNoQuery } from "../middleware/strict-query";
import { paceAnswer } from "../runs/stalled-client";

/** `POST /run`: starts a run and streams its events (SSE) or waits for its result (JSON). */
export function runRoutes(deps: GatewayDeps, router: Router = Router()): Router {

  router.post("/run", async (req, res) => {
    // A `stream: false` answer holds the run's whole output.
    paceAnswer(req, res);
    readsNoQuery(req);
    const auth = authOf(req);
    const body = runRequestSchema.parse(req.body ?? {});
    const key = idempotencyKeyOf(req);
    const ids = newRunIds(body.task_id);

    if (key) {
      const claim = await claimKeyForRun(deps.prisma, { orgId: auth.orgId, key, hash: requestHash(auth.agentId, body), ...ids });
      if (!claim.owner) {
        // The same request again: answer with the run the first one started.
        await respondWithRun(deps, req, res, { runId: claim.runId, taskId: claim.taskId, stream: body.stream });
        return;
      }
    }

    // A refused request, or a run the queue could not take, does not use up its key.
    const release = async () => {
      if (key) await releaseIdempotencyKey(deps.prisma, auth.orgId, key, ids.runId);
    };
    await startRun(deps, req, res, {
      runId: ids.runId,
      query: body.query,
      stream: body.stream,
      create: async () => {
        try {
          return await createRun(deps.prisma, { auth, query: body.query, taskId: body.task_id, context: body.context, ids });
        } catch (err) {
          await release().catch(() => {});
          throw err;
        }
      },
      unqueued: release,
    });
  });

  return router;
}
