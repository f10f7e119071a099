/**
 * The scripted model's Express app: a deterministic OpenAI-compatible chat-completions server
 * whose answers are driven by directives in the last user message (see the service README).
 */
import express, { type ErrorRequestHandler, type Express } from "express";
import type { Logger } from "@agentrun/logger";
import { completionsRouter } from "./completions.routes";
import { openAIError } from "./errors";
import { modelsRouter } from "./models.routes";

export interface AppDeps {
  logger: Logger;
}

/** Builds the app: routes under `/v1`, `GET /health`, and JSON (never HTML) errors. No side effects. */
export function createApp({ logger }: AppDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  app.use(express.json({ limit: "10mb" }));

  app.get("/health", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.use("/v1", modelsRouter());
  app.use("/v1", completionsRouter({ logger }));

  app.use((req, res) => {
    res.status(404).json(openAIError(404, `unknown route: ${req.method} ${req.path}`));
  });

  const onError: ErrorRequestHandler = (err: unknown, req, res, _next) => {
    const status = httpStatus(err);
    if (status >= 500) logger.error({ err, method: req.method, path: req.path }, "request failed");
    if (res.headersSent) {
      // Mid-stream there is no way to send an error body any more; cutting the connection tells the client.
      res.destroy();
      return;
    }
    const message = status >= 500 ? "internal error" : err instanceof Error ? err.message : "bad request";
    res.status(status).json(openAIError(status, message));
  };
  app.use(onError);
  return app;
}

/** The status an error carries (body-parser sets `status` on malformed or oversized bodies), else 500. */
function httpStatus(err: unknown): number {
  if (typeof err === "object" && err !== null) {
    const status = (err as { status?: unknown; statusCode?: unknown }).status ?? (err as { statusCode?: unknown }).statusCode;
    if (typeof status === "number" && status >= 400 && status <= 599) return status;
  }
  return 500;
}
