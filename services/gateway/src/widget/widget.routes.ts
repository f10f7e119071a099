import { Router, type Request, type RequestHandler, type Response } from "express";
import { VISITOR_TOKEN_HEADER, visitorUserId, widgetRunRequestSchema } from "@agentrun/contracts";
import { newId } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import { isPublishedSecret } from "@agentrun/config";
import { DEV_WIDGET_TOKEN_SECRET } from "../config";
import { noRoute } from "../middleware/error.middleware";
import type { GatewayDeps } from "../deps";
import type { AuthFailureGuard } from "../rate-limit/auth-failure-guard";
import { jsonBody } from "@agentrun/json-body";
import { createRun, newRunIds } from "../runs/create-run";
import { claimKeyForRun, idempotencyKeyOf, releaseIdempotencyKey, requestHash } from "../runs/idempotency";
import { respondWithRun } from "../runs/respond-run";
import { startRun } from "../runs/start-run";
import { resumeAfter, streamRunEvents } from "../runs/run-events-stream";
import { checkRunOfTask, isIdShaped, ownedTask } from "../tasks/task-access";
import { VisitorTokens } from "./visitor-token";
import { widgetAuth } from "./widget-auth.middleware";
import { widgetAuthContext, widgetOf, type WidgetContext } from "./widget-context";
import { widgetCancelRun } from "./widget-cancel.routes";
import { widgetPreflight } from "./widget-cors";
import { newVisitorKeySpent, newVisitorRepeatAllowed, newVisitorRun, widgetKeyScope } from "./widget-idempotency";
import { WidgetKeyCache } from "./widget-key-cache";
import { widgetLimits } from "./widget-limits";
import { readsNoQuery, takesNoBody } from "../middleware/strict-query";
import { paceAnswer } from "../runs/stalled-client";
import { actingFromHere } from "../shutdown";

const RUN_PATH = "/run";
const EVENTS_PATH = "/tasks/:task_id/runs/:run_id/events";
const CANCEL_PATH = "/tasks/:task_id/runs/:run_id/cancel";

/**
 * The widget gateway, mounted at `/api/v1/widget` ahead of the API-key routers: a publishable
 * widget key and an allowed Origin instead of a secret key; visitors identified by a signed
 * token that every answer renews (X-Visitor-Token, and `visitor_token` in JSON bodies). A stream
 * carries the token only in its header: its first event is `run_started`, like `/api/run`.
 * Nothing here lists tasks, messages or memories: a visitor reaches only the runs of its own tasks.
 */
export function widgetRoutes(deps: GatewayDeps, failures: AuthFailureGuard): Router {
  const { config } = deps;
  const router = Router();
  const keys = new WidgetKeyCache(deps.prisma, config.AUTH_CACHE_TTL_MS);
  const tokens = new VisitorTokens(config.WIDGET_TOKEN_SECRET, config.WIDGET_TOKEN_TTL_S);
  const store = { prisma: deps.prisma, redis: deps.redis, redisPrefix: config.REDIS_PREFIX, hub: deps.hub };
  // The development default, or the placeholder of docker-compose.yml.
  if (config.NODE_ENV === "production" && isPublishedSecret(config.WIDGET_TOKEN_SECRET, DEV_WIDGET_TOKEN_SECRET)) {
    deps.logger.warn("WIDGET_TOKEN_SECRET is a published default: visitor tokens can be forged; set a long random value");
  }

  router.options([RUN_PATH, EVENTS_PATH, CANCEL_PATH], widgetPreflight(keys, failures));
  router.use(widgetAuth(keys, tokens, failures));
  // A run's events, and stopping it, are the visitor's own: a request without the visitor's token
  // is a failed authentication, refused before it counts against the widget limits (HEAD included).
  const visitorRequired: RequestHandler = async (req, _res, next) => {
    if (!widgetOf(req).visitorId) throw await failures.reject(req, new AppError("unauthorized", { message: "A visitor token (X-Visitor-Token) is required." }));
    next();
  };
  router.get(EVENTS_PATH, visitorRequired);
  router.post(CANCEL_PATH, visitorRequired);
  router.use(widgetLimits({ limiter: deps.limiter, redisPrefix: config.REDIS_PREFIX, perKey: config.WIDGET_RPM_PER_KEY, perIp: config.WIDGET_RPM_PER_IP }));
  router.use(jsonBody(config.BODY_LIMIT_BYTES));
  router.use(actingFromHere());

  /** `POST /run`: like `/api/run`, for the visitor (a new one when no token was sent). */
  router.post(RUN_PATH, async (req, res) => {
    // A `stream: false` answer holds the run's whole output.
    paceAnswer(req, res);
    readsNoQuery(req);
    const w = widgetOf(req);
    const body = widgetRunRequestSchema.parse(req.body ?? {});
    const key = idempotencyKeyOf(req);
    const visitorId = w.visitorId ?? newId("vis");
    const token = tokens.sign(visitorId, w.key.id);
    const auth = widgetAuthContext(w);
    // The visitor is the run's user: memories saved and recalled are the visitor's own.
    const context = { user_id: visitorUserId(visitorId) };
    const ids = newRunIds(body.task_id);
    const scopedKey = key === undefined ? undefined : widgetKeyScope(w.key.id, w.visitorId, key);
    if (key !== undefined && scopedKey !== undefined) {
      const hash = requestHash(auth.agentId, body);
      const started = w.visitorId ? await newVisitorRun(deps.prisma, { orgId: auth.orgId, widgetKeyId: w.key.id, visitorId: w.visitorId, key, hash }) : null;
      if (started) return replayRun(req, res, w, { ...started, stream: body.stream });
      const claim = await claimKeyForRun(deps.prisma, { orgId: auth.orgId, key: scopedKey, hash, ...ids });
      if (!claim.owner) {
        if (!w.visitorId && !(await newVisitorRepeatAllowed(deps.prisma, { orgId: auth.orgId, scopedKey, taskId: claim.taskId }))) throw newVisitorKeySpent();
        return replayRun(req, res, w, { ...claim, stream: body.stream });
      }
    }
    // A refused request, or a run the queue could not take, does not use up its key.
    const release = async () => {
      if (scopedKey) await releaseIdempotencyKey(deps.prisma, auth.orgId, scopedKey, ids.runId);
    };
    await startRun(deps, req, res, {
      runId: ids.runId,
      query: body.query,
      stream: body.stream,
      // Renewed (or a new visitor's) only once the run is accepted: a refusal carries no token.
      create: async () => {
        try {
          const created = await createRun(deps.prisma, { auth, query: body.query, taskId: body.task_id, context, visitorId, ids });
          res.setHeader(VISITOR_TOKEN_HEADER, token);
          return created;
        } catch (err) {
          await release().catch(() => {});
          throw err;
        }
      },
      unqueued: release,
      extra: { visitor_token: token },
    });
  });

  /**
   * The same request again (its answer was lost on the way): the run the first one started, with
   * a token for that run's visitor: the caller's own (keys are kept per visitor, see
   * `widgetKeyScope`), or the one that a request without a token started.
   */
  async function replayRun(req: Request, res: Response, w: WidgetContext, claim: { runId: string; taskId: string; stream: boolean }): Promise<void> {
    const task = await deps.prisma.task.findUnique({ where: { id: claim.taskId }, select: { visitorId: true } });
    if (!task?.visitorId || (w.visitorId && w.visitorId !== task.visitorId)) throw new AppError("task_not_found", { message: `Task '${claim.taskId}' not found.` });
    const token = tokens.sign(task.visitorId, w.key.id);
    res.setHeader(VISITOR_TOKEN_HEADER, token);
    await respondWithRun(deps, req, res, { runId: claim.runId, taskId: claim.taskId, stream: claim.stream, extra: { visitor_token: token } });
  }

  /** `GET /tasks/:task_id/runs/:run_id/events`: replay and follow a run of the visitor's own task. */
  router.get(EVENTS_PATH, async (req, res) => {
    const w = widgetOf(req);
    // A request without the visitor's token was refused before the limits (above).
    const visitorId = w.visitorId!;
    takesNoBody(req);
    const afterSeq = resumeAfter(req);
    const task = await ownedTask(deps.prisma, widgetAuthContext(w), req.params.task_id);
    if (task.visitorId !== visitorId) throw new AppError("forbidden", { message: "This task belongs to another visitor." });
    const runId = req.params.run_id;
    const found = isIdShaped(runId) ? await deps.prisma.run.findUnique({ where: { id: runId }, select: { id: true, taskId: true, status: true, lastSeq: true } }) : null;
    const run = checkRunOfTask(found, task, runId);
    res.setHeader(VISITOR_TOKEN_HEADER, tokens.sign(visitorId, w.key.id));
    await streamRunEvents(req, res, { store, run, afterSeq, heartbeatMs: config.SSE_HEARTBEAT_MS });
  });

  router.post(CANCEL_PATH, widgetCancelRun(deps, tokens));

  router.use((req, _res, next) => next(noRoute(req.method, req.originalUrl)));
  return router;
}
