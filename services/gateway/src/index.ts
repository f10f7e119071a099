import { once } from "node:events";
import https from "node:https";
import { loadConfig, onStopRequest, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { gatewayConfigSchema } from "./config";
import { createGatewayDeps } from "./create-deps";
import { createApp } from "./app";
import { endAllStreams } from "./runs/sse";
import { endAllWaits } from "./runs/respond-run";
import { createHttpServer } from "./http-server";
import { servedWidget } from "./widget/widget-bundle";

runMain(async () => {
  const config = loadConfig(gatewayConfigSchema);
  const logger = createLogger({ service: "gateway", level: config.LOG_LEVEL });
  const { deps, close } = createGatewayDeps(config, logger);
  const app = createApp(deps);
  const server = createHttpServer(app, config);
  // A port in use rejects here, so runMain reports it as one line.
  server.listen(config.PORT);
  await once(server, "listening");
  logger.info({ port: config.PORT, tls: server instanceof https.Server }, "gateway listening");
  // Bundled now rather than at the first page's request; a failure is retried at each request.
  servedWidget().catch((err: unknown) => logger.error({ err }, "could not bundle the chat widget (GET /widget.js answers 500 until it can)"));

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // Stop accepting connections; open streams end when their clients re-attach elsewhere.
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeIdleConnections();
    // Open SSE streams never end by themselves: end them (clients re-attach with Last-Event-ID
    // through another instance); JSON answers waiting for their run answer 202 with its status;
    // whatever is still open after a short grace is cut.
    const ended = endAllStreams();
    const answered = endAllWaits();
    logger.info({ streams: ended, waits: answered }, "ended open streams and waits");
    const cut = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_STREAM_GRACE_MS);
    await closed;
    clearTimeout(cut);
    await close();
    logger.info("stopped");
    process.exit(0);
  };
  onStopRequest((reason) => void stop(reason));
});
