import { Router } from "express";
import { Prisma, newId } from "@agentrun/db";
import { AppError, fieldRefused } from "@agentrun/errors";
import { runListQuerySchema, taskCreateSchema, taskListQuerySchema } from "@agentrun/contracts";
import { removeRunKeys } from "@agentrun/events";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { cancelRunAndWait } from "../tasks/cancel-run";
import { ownedTask } from "../tasks/task-access";
import { runListPage } from "../views/run-list-query";
import { taskListBody } from "../views/list-queries";
import { taskDetailBody } from "../views/task-detail-query";
import { toTaskView } from "../views/task.view";
import { readsNoQuery, takesNoBody } from "../middleware/strict-query";
import { paceAnswer } from "../runs/stalled-client";

/** Tasks of the caller's agent: list, create, read, delete, and their runs. */
export function tasksRoutes(deps: GatewayDeps, router: Router = Router()): Router {
  const { prisma } = deps;
  const store = { prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX };

  router.get("/tasks", async (req, res) => {
    // Pages of tasks, a task and pages of its runs can be many megabytes (see paceAnswer).
    paceAnswer(req, res);
    takesNoBody(req);
    const auth = authOf(req);
    const q = taskListQuerySchema.parse(req.query);
    res.type("application/json").send(await taskListBody(prisma, auth, q));
  });

  router.post("/tasks", async (req, res) => {
    readsNoQuery(req);
    // Refused rather than ignored: a client retrying with it would count on getting one task.
    if (req.get("idempotency-key") !== undefined) {
      throw fieldRefused("Idempotency-Key", "POST /api/tasks does not take an Idempotency-Key (only POST /api/run does); send the request without it.");
    }
    const auth = authOf(req);
    const body = taskCreateSchema.parse(req.body ?? {});
    const task = await prisma.task.create({
      data: {
        id: newId("task"),
        orgId: auth.orgId,
        agentId: auth.agentId,
        // Without a title, the task takes its first run's query as title (agentrun_create_run).
        title: body.title ?? "",
        userId: body.user_id,
        metadata: (body.metadata as Prisma.InputJsonValue) ?? undefined,
      },
    });
    res.status(201).json(toTaskView(task));
  });

  router.get("/tasks/:task_id", async (req, res) => {
    paceAnswer(req, res);
    readsNoQuery(req);
    takesNoBody(req);
    res.type("application/json").send(await taskDetailBody(prisma, authOf(req), req.params.task_id));
  });

  router.get("/tasks/:task_id/runs", async (req, res) => {
    paceAnswer(req, res);
    takesNoBody(req);
    const q = runListQuerySchema.parse(req.query);
    const task = await ownedTask(prisma, authOf(req), req.params.task_id);
    const page = await runListPage(prisma, { taskId: task.id, limit: q.limit, after: q.after }).catch(async (err: unknown) => {
      // An `after` that names no run of the task: the task may have been deleted (with its
      // runs) since it was checked; 404 then, 400 only for a cursor that is wrong.
      if (q.after) await ownedTask(prisma, authOf(req), req.params.task_id);
      throw err;
    });
    // None: the task may have been deleted (with its runs) since it was checked; 404 then.
    if (page.runs.length === 0) await ownedTask(prisma, authOf(req), req.params.task_id);
    res.json(page);
  });

  router.delete("/tasks/:task_id", async (req, res) => {
    readsNoQuery(req);
    takesNoBody(req);
    const task = await ownedTask(prisma, authOf(req), req.params.task_id);
    // Stop what is in progress first, so that its streams end with run_cancelled and no worker
    // writes to the task while it is deleted. The task goes only while no run holds it: a run
    // started on it meanwhile is stopped too (a few times at most, then 409).
    for (let attempt = 0; ; attempt++) {
      // Ids of all its runs (for their event logs), queries of those in progress only: a task may
      // hold thousands of runs, each with a query of up to 32,000 characters.
      const runs = await prisma.run.findMany({ where: { taskId: task.id }, select: { id: true } });
      const inProgress = await prisma.run.findMany({ where: { taskId: task.id, status: { in: ["queued", "running"] } }, select: { id: true, status: true, query: true } });
      await Promise.all(inProgress.map((run) => cancelRunAndWait(store, run)));
      // The Idempotency-Keys of its runs go with the task, in the same statement: a replay of a
      // request that started one of them finds its key free instead of waiting for a run that
      // no longer exists.
      const [deleted] = await prisma.$queryRaw<{ count: number }[]>`
        WITH gone AS (DELETE FROM tasks WHERE id = ${task.id} AND active_run_id IS NULL RETURNING id, org_id),
          keys AS (DELETE FROM idempotency_keys k USING gone WHERE k.org_id = gone.org_id AND k.task_id = gone.id)
        SELECT count(*)::int AS count FROM gone`;
      const gone = deleted?.count === 1 || !(await prisma.task.findUnique({ where: { id: task.id }, select: { id: true } }));
      if (gone) {
        // The task is gone: a Redis that fails now must not answer the delete as failed (a retry
        // would get 404). Keys left behind are unreachable (their runs are gone) and expire.
        // Until they go, a run's log holds its events from seq 2 on without run_started: a reader
        // that looked the run up before tells that from a gap by the run's row (readFoundRunEvents).
        if (runs.length) {
          await removeRunKeys(deps.redis, deps.config.REDIS_PREFIX, runs.map((r) => r.id)).catch((err: unknown) => {
            req.log.warn({ err, taskId: task.id }, "could not remove the Redis keys of a deleted task's runs; they expire on their own");
          });
        }
        break;
      }
      if (attempt === 2) throw new AppError("run_in_progress", { message: "Runs keep starting on this task; retry the delete." });
    }
    res.status(204).end();
  });

  return router;
}
