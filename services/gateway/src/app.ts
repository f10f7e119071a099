import express, { Router, type Express } from "express";
import type { GatewayDeps } from "./deps";
import { requestId } from "./middleware/request-id.middleware";
import { authenticate } from "./middleware/auth.middleware";
import { jsonBody } from "@agentrun/json-body";
import { errorHandler, notFound } from "./middleware/error.middleware";
import { orgRateLimit, orgRateLimitOnAgentRefusal } from "./middleware/rate-limit.middleware";
import { requireHttps } from "./middleware/require-https.middleware";
import { refuseOptions } from "./middleware/refuse-options.middleware";
import { securityHeaders } from "./middleware/security-headers.middleware";
import { answerConditionalGetsOnlyWithValidator } from "./middleware/conditional-get";
import { strictQueryParser } from "./middleware/strict-query";
import { refuseMalformedHead } from "./middleware/malformed-head.middleware";
import { authFailureGuard } from "./rate-limit/auth-failure-guard";
import { openApiRoutes } from "./openapi/openapi.routes";
import { healthRoutes } from "./routes/health.routes";
import { runRoutes } from "./routes/run.routes";
import { memoryRoutes } from "./routes/memory.routes";
import { tasksRoutes } from "./routes/tasks.routes";
import { messagesRoutes } from "./routes/messages.routes";
import { runEventsRoutes } from "./routes/run-events.routes";
import { widgetRoutes } from "./widget/widget.routes";
import { widgetAssetRoutes } from "./widget/widget-assets.routes";
import { actingFromHere, closeConnectionsWhenStopping } from "./shutdown";

/** The gateway's HTTP app: no side effects, no listen (tests drive it with supertest). */
export function createApp(deps: GatewayDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  // No ETag computed from every response body (a hash of each list page): API answers are
  // per-caller and change with every run. widget.js sets its own (see widgetAssetRoutes).
  app.set("etag", false);
  answerConditionalGetsOnlyWithValidator(app);
  app.set("query parser", strictQueryParser);
  app.set("trust proxy", deps.config.TRUST_PROXY);
  // For the answers the HTTP server gives outside the app (see createHttpServer).
  app.locals.logger = deps.logger;
  app.use(requestId(deps.logger));
  app.use(closeConnectionsWhenStopping());
  app.use(securityHeaders());
  app.use(refuseMalformedHead());
  app.use(["/healthz", "/readyz"], refuseOptions());
  // Routes are registered on the router they are mounted in rather than each in a router of its
  // own: every router a request enters costs it a walk of that router's layers and their closures.
  healthRoutes(deps, app.router);
  app.use(requireHttps(deps.config.REQUIRE_HTTPS));
  // After the HTTPS check: only the health probes answer plain HTTP, whatever the method.
  app.use(["/api/openapi.json", "/api/v1/openapi.json", "/widget.js", "/widget-demo"], refuseOptions());
  openApiRoutes(app.router);
  widgetAssetRoutes(deps.config, app.router);
  // Failed authentications of one client address, counted across the widget and API routes.
  const failures = authFailureGuard({ limiter: deps.limiter, redisPrefix: deps.config.REDIS_PREFIX, limit: deps.config.AUTH_FAILURE_LIMIT });
  // The widget gateway authenticates with a publishable widget key, not a Bearer key: it is
  // mounted before the API router, which refuses every request without one.
  app.use(["/api/v1/widget", "/api/widget"], widgetRoutes(deps, failures));

  const api = Router();
  api.use(authenticate(deps.auth, failures));
  api.use(orgRateLimitOnAgentRefusal(deps.limiter, deps.config.REDIS_PREFIX));
  api.use(orgRateLimit(deps.limiter, deps.config.REDIS_PREFIX));
  api.use(refuseOptions());
  api.use(jsonBody(deps.config.BODY_LIMIT_BYTES));
  api.use(actingFromHere());
  for (const routes of [runRoutes, memoryRoutes, tasksRoutes, messagesRoutes, runEventsRoutes]) routes(deps, api);

  // Every /api/... endpoint is also served under /api/v1/...: one mount, so that a request passes
  // the api's middleware (and the rate limiter) once, even when no route matches.
  app.use(["/api/v1", "/api"], api);
  app.use(notFound());
  app.use(errorHandler());
  return app;
}
