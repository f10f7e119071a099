import { once } from "node:events";
import https from "node:https";
import { loadConfig, onStopRequest, runMain, settingsForLog } from "@agentrun/config";
import { drainServer } from "@agentrun/express-server";
import { createLogger } from "@agentrun/logger";
import { gatewayConfigSchema } from "./config";
import { createGatewayDeps } from "./create-deps";
import { createApp } from "./app";
import { endAllStreams } from "./runs/sse";
import { endAllWaits } from "./runs/respond-run";
import { createHttpServer } from "./http-server";
import { servedWidget } from "./widget/widget-bundle";
import { answerWaitingRequests, beginStopping, runStartsSettled } from "./shutdown";

/**
 * A run start's wait beyond its two statements (claim or create, and the end of a run the queue
 * could not take): its queueing and the subscription before it, a few seconds at most.
 */
const RUN_START_SETTLE_EXTRA_MS = 5000;

runMain(async () => {
  const config = loadConfig(gatewayConfigSchema);
  const logger = createLogger({ service: "gateway", level: config.LOG_LEVEL, secrets: [config.INTERNAL_TOKEN, config.WIDGET_TOKEN_SECRET] });
  const { deps, close } = createGatewayDeps(config, logger);
  const app = createApp(deps);
  const server = createHttpServer(app, config);
  // A port in use rejects here, so runMain reports it as one line.
  server.listen(config.PORT);
  await once(server, "listening");
  logger.info({ port: config.PORT, tls: server instanceof https.Server, settings: settingsForLog(config) }, "gateway listening");
  // Bundled now rather than at the first page's request; a failure is retried at each request.
  servedWidget().catch((err: unknown) => logger.error({ err }, "could not bundle the chat widget (GET /widget.js answers 500 until it can)"));

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // From now on /readyz answers 503 and every answer closes its connection (see shutdown.ts).
    beginStopping();
    // Stop accepting connections, and close each one as it falls idle (a stream just ended, an
    // answer sent before the stop). Requests still being handled get a short grace; one starting
    // a run is awaited longer (its statements time out on their own), so that its run is queued
    // and its caller answered before the queue closes. Requests that have not begun to act are
    // answered 503 first; whatever is still open after both is cut.
    const drained = drainServer(server, {
      graceMs: config.SHUTDOWN_STREAM_GRACE_MS,
      beforeCut: async () => {
        const answered = await answerWaitingRequests();
        if (answered > 0) logger.info({ requests: answered }, "answered 503 to requests that had not begun to act");
        // Awaited last, so that a run start begun while those answers were sent is awaited too.
        if (!(await runStartsSettled(2 * config.DB_QUERY_TIMEOUT_MS + RUN_START_SETTLE_EXTRA_MS))) logger.warn("runs still being started at the deadline: cutting them");
      },
    });
    // Open SSE streams never end by themselves: end them (clients re-attach with Last-Event-ID
    // through another instance); JSON answers waiting for their run answer 202 with its status.
    const ended = endAllStreams();
    const answered = endAllWaits();
    logger.info({ streams: ended, waits: answered }, "ended open streams and waits");
    await drained;
    await close();
    logger.info("stopped");
    process.exit(0);
  };
  onStopRequest((reason) => {
    stop(reason).catch((err: unknown) => {
      logger.error({ err }, "shutdown failed");
      process.exit(1);
    });
  });
});
