import type { RequestHandler } from "express";
import { VISITOR_TOKEN_HEADER } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { readsNoQuery, takesNoBody } from "../middleware/strict-query";
import { cancelRun } from "../tasks/cancel-run";
import { checkRunOfTask, isIdShaped, ownedTask } from "../tasks/task-access";
import { toRunView } from "../views/run.view";
import type { VisitorTokens } from "./visitor-token";
import { widgetAuthContext, widgetOf } from "./widget-context";

/**
 * `POST /tasks/:task_id/runs/:run_id/cancel`: the widget's Stop button, `POST …/cancel` of the API
 * for a run of the visitor's own task. Mounted behind the visitor-token check (no token: 401 before
 * the limits), the widget limits and the JSON body parser. Another visitor's task is 403, as on
 * the events route. Answers 202 with the run as the API's cancel does, plus `visitor_token` as
 * every JSON answer of the widget; the run's stream then ends with `run_cancelled` (or with the
 * end it had already reached, which the cancel leaves as it is).
 */
export function widgetCancelRun(deps: GatewayDeps, tokens: VisitorTokens): RequestHandler<{ task_id: string; run_id: string }> {
  const { prisma } = deps;
  const store = { prisma, redis: deps.redis, redisPrefix: deps.config.REDIS_PREFIX, hub: deps.hub };
  return async (req, res) => {
    readsNoQuery(req);
    takesNoBody(req);
    const w = widgetOf(req);
    // Refused earlier without the visitor's token.
    const visitorId = w.visitorId!;
    const task = await ownedTask(prisma, widgetAuthContext(w), req.params.task_id);
    if (task.visitorId !== visitorId) throw new AppError("forbidden", { message: "This task belongs to another visitor." });
    const runId = req.params.run_id;
    const run = checkRunOfTask(isIdShaped(runId) ? await prisma.run.findUnique({ where: { id: runId } }) : null, task, runId);
    await cancelRun(store, run);
    // Gone when its task was deleted meanwhile.
    const current = await prisma.run.findUnique({ where: { id: run.id } });
    if (!current) throw new AppError("run_not_found", { message: `Task '${run.taskId}' has no run '${run.id}' any more.` });
    const token = tokens.sign(visitorId, w.key.id);
    res.setHeader(VISITOR_TOKEN_HEADER, token);
    res.status(202).json({ ...toRunView(current), visitor_token: token });
  };
}
