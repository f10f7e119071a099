import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import type { Express } from "express";
import { answerMalformedRequests, answerRaw, appMessageClasses, continueWithinLimit } from "@agentrun/express-server";
import type { Logger } from "@agentrun/logger";
import type { GatewayConfig } from "./config";
import { noRoute } from "./middleware/error.middleware";
import { newRequestId } from "./middleware/request-id.middleware";

/** Longest interval between Node's checks for requests past their time (its default: 30 s). */
const MAX_TIMEOUT_CHECK_INTERVAL_MS = 30_000;

/**
 * The gateway's server for `app`: HTTPS when a certificate is configured (config requires both
 * files or neither), otherwise plain HTTP, usually behind a TLS-terminating proxy (see
 * TRUST_PROXY, REQUIRE_HTTPS). Not listening yet.
 *
 * A request must arrive whole, headers and body, within REQUEST_TIMEOUT_MS, or it is answered 408
 * (see {@link answerMalformedRequests}); the time stops once the request is received, so a long
 * answer (an event stream, a wait for a run's end) is not cut by it.
 */
export function createHttpServer(app: Express, config: GatewayConfig): http.Server | https.Server {
  const options: http.ServerOptions = {
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    // The headers are part of the request: they get no longer than all of it.
    headersTimeout: config.REQUEST_TIMEOUT_MS,
    // Node looks for requests past their time only at this interval: often enough that one is
    // answered within about a tenth of the timeout after it.
    connectionsCheckingInterval: Math.min(MAX_TIMEOUT_CHECK_INTERVAL_MS, Math.max(50, Math.round(config.REQUEST_TIMEOUT_MS / 10))),
    // A request without Host is refused by the app (refuseMalformedHead), in the contract's shape,
    // rather than by Node with a bare 400.
    requireHostHeader: false,
    ...appMessageClasses(app),
  };
  const tls = config.TLS_CERT_FILE && config.TLS_KEY_FILE ? { cert: readFileSync(config.TLS_CERT_FILE), key: readFileSync(config.TLS_KEY_FILE) } : null;
  // A TLS handshake gets no longer than a request (Node's own limit is 120 s).
  const server = tls ? https.createServer({ ...options, ...tls, handshakeTimeout: config.REQUEST_TIMEOUT_MS }, app) : http.createServer(options, app);
  server.keepAliveTimeout = config.KEEP_ALIVE_TIMEOUT_MS;
  // Headers are bounded by their total size (Node's 16 KiB): no count of its own, so that a
  // request with many small headers is not read with some of them silently dropped.
  server.maxHeadersCount = 0;
  answerMalformedRequests(server, newRequestId, loggerOf(app));
  continueWithinLimit(server, config.BODY_LIMIT_BYTES);
  // Any other expectation goes to the app too, which refuses it (417) in the contract's shape
  // where Node would answer a bare 417 (refuseMalformedHead).
  server.on("checkExpectation", (req: http.IncomingMessage, res: http.ServerResponse) => server.emit("request", req, res));
  // CONNECT (a proxy tunnel) is not a request Node hands to the app: answered here, as the app
  // answers a method no route serves, where Node would close the connection without a word.
  server.on("connect", (req: http.IncomingMessage, socket: Duplex) => {
    const { code, message } = noRoute("CONNECT", req.url ?? "");
    answerRaw(socket, 404, "Not Found", { code, message }, newRequestId());
  });
  return server;
}

/** The gateway's logger, which createApp leaves on `app.locals`; none for a bare app (a test's). */
function loggerOf(app: Express): Logger | undefined {
  return app.locals.logger as Logger | undefined;
}
