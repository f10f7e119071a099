import { readFileSync } from "node:fs";
import { once } from "node:events";
import http from "node:http";
import https from "node:https";
import { loadConfig, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { declaresBodyOver } from "@agentrun/json-body";
import { gatewayConfigSchema } from "./config";
import { createGatewayDeps } from "./create-deps";
import { createApp } from "./app";
import { endAllStreams } from "./runs/sse";
import { endAllWaits } from "./runs/respond-run";
import { answerMalformedRequests } from "./middleware/malformed-requests";

runMain(async () => {
  const config = loadConfig(gatewayConfigSchema);
  const logger = createLogger({ service: "gateway", level: config.LOG_LEVEL });
  const { deps, close } = createGatewayDeps(config, logger);
  const app = createApp(deps);
  // Direct TLS when a certificate is configured (config requires both files or neither);
  // otherwise plain HTTP, usually behind a TLS-terminating proxy (see TRUST_PROXY, REQUIRE_HTTPS).
  const tls = config.TLS_CERT_FILE && config.TLS_KEY_FILE ? { cert: readFileSync(config.TLS_CERT_FILE), key: readFileSync(config.TLS_KEY_FILE) } : null;
  const server = tls ? https.createServer(tls, app) : http.createServer(app);
  server.keepAliveTimeout = 65_000;
  // Headers are bounded by their total size (Node's 16 KiB): no count of its own, so that a
  // request with many small headers is not read with some of them silently dropped.
  server.maxHeadersCount = 0;
  answerMalformedRequests(server);
  // Expect: 100-continue: a body declared over the limit is refused (413, by the app) without
  // inviting the client to send it.
  server.on("checkContinue", (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!declaresBodyOver(req, config.BODY_LIMIT_BYTES)) res.writeContinue();
    server.emit("request", req, res);
  });
  // A port in use rejects here, so runMain reports it as one line.
  server.listen(config.PORT);
  await once(server, "listening");
  logger.info({ port: config.PORT, tls: tls !== null }, "gateway listening");

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
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
});
