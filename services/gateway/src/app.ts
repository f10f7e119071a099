import express, { Router, type Express } from "express";
import type { GatewayDeps } from "./deps";
import { requestId } from "./middleware/request-id.middleware";
import { authenticate } from "./middleware/auth.middleware";
import { jsonBody } from "./middleware/json-body.middleware";
import { errorHandler, notFound } from "./middleware/error.middleware";
import { healthRoutes } from "./routes/health.routes";
import { runRoutes } from "./routes/run.routes";

/** The gateway's HTTP app: no side effects, no listen (tests drive it with supertest). */
export function createApp(deps: GatewayDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", parseTrustProxy(deps.config.TRUST_PROXY));
  app.use(requestId(deps.logger));
  app.use(healthRoutes(deps));

  const api = Router();
  api.use(authenticate(deps.auth));
  api.use(jsonBody(deps.config.BODY_LIMIT_BYTES));
  api.use(runRoutes(deps));

  // Every /api/... endpoint is also served under /api/v1/....
  app.use("/api/v1", api);
  app.use("/api", api);
  app.use(notFound());
  app.use(errorHandler());
  return app;
}

function parseTrustProxy(v: string): boolean | number | string {
  if (v === "true") return true;
  if (v === "false") return false;
  if (/^\d+$/.test(v)) return Number(v);
  return v;
}
