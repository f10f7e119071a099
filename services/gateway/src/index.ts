import { loadConfig, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { gatewayConfigSchema } from "./config";
import { createGatewayDeps } from "./create-deps";
import { createApp } from "./app";
import { endAllStreams } from "./runs/sse";

runMain(async () => {
  const config = loadConfig(gatewayConfigSchema);
  const logger = createLogger({ service: "gateway", level: config.LOG_LEVEL });
  const { deps, close } = createGatewayDeps(config, logger);
  const server = createApp(deps).listen(config.PORT, () => logger.info({ port: config.PORT }, "gateway listening"));
  server.keepAliveTimeout = 65_000;

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // Stop accepting connections; open streams end when their clients re-attach elsewhere.
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeIdleConnections();
    // Open SSE streams never end by themselves: end them (clients re-attach with Last-Event-ID
    // through another instance), and cut whatever is still open after a short grace.
    const ended = endAllStreams();
    logger.info({ streams: ended }, "ended open streams");
    const cut = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_STREAM_GRACE_MS);
    await closed;
    clearTimeout(cut);
    await close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
});
