import { accessSync, constants } from "node:fs";
import proxyAddr from "proxy-addr";
import { z } from "zod";
import { databaseUrl, dbPreparedStatements, dbQueryTimeoutMs, envBoolean, envInteger, httpUrl, internalToken, logLevel, MAX_TIMER_MS, port, redisPrefix, redisUrl, timerMs } from "@agentrun/config";

const readableFile = z.string().refine((p) => {
  try {
    accessSync(p, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}, "is not a readable file");

/** Default of WIDGET_TOKEN_SECRET, for development only: anyone can forge visitor tokens with it. */
export const DEV_WIDGET_TOKEN_SECRET = "agentrun-dev-widget-token-secret-0123456789";

/** TRUST_PROXY as Express takes it; a list whose entries are not addresses, subnets or names is refused. */
function trustProxy(value: string, ctx: z.RefinementCtx): boolean | number | string[] {
  const v = value.trim();
  if (v === "true" || v === "false") return v === "true";
  if (/^\d+$/.test(v)) return Number(v);
  const list = v.split(",").map((part) => part.trim());
  try {
    proxyAddr.compile(list);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: `must be true, false, a hop count or a comma-separated list of addresses, subnets, loopback, linklocal or uniquelocal (${(err as Error).message})` });
    return z.NEVER;
  }
  return list;
}

/**
 * SSE_HEARTBEAT_MS's largest value: the widget (public/widget/events.js) gives a stream, and the
 * answer that starts it, three ping intervals of silence with a browser timer, whose limit is
 * Node's; a longer wait fires at once and every stream would count as lost.
 */
export const SSE_HEARTBEAT_MAX_MS = Math.floor(MAX_TIMER_MS / 3);

/**
 * KEEP_ALIVE_TIMEOUT_MS's largest value: Node's server sets an idle connection's socket timeout
 * 1 s past it, which must fit a timer (Node cuts a longer one down, with a warning).
 */
export const KEEP_ALIVE_TIMEOUT_MAX_MS = MAX_TIMER_MS - 1000;

/** The gateway's environment. */
export const gatewayConfigSchema = z.object({
  PORT: port(3000),
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: redisPrefix,
  LOG_LEVEL: logLevel,
  MEMORY_URL: httpUrl.default("http://127.0.0.1:3002"),
  INTERNAL_TOKEN: internalToken,
  /** Longest wait for the memory service before answering 503. */
  MEMORY_TIMEOUT_MS: timerMs().default(2000),
  /** How long `stream: false` waits for the end of a run before answering 202. */
  RUN_WAIT_TIMEOUT_MS: timerMs().default(120_000),
  /** Interval of the SSE keepalive comment. */
  SSE_HEARTBEAT_MS: timerMs(1, SSE_HEARTBEAT_MAX_MS, "the widget waits three intervals for a ping, and a timer waits at most 2147483647 ms").default(14_000),
  /** How long a looked-up API key or agent is trusted; bounds how late a revocation takes effect. */
  AUTH_CACHE_TTL_MS: timerMs(0, 1000).default(900),
  /**
   * Longest a request may take to arrive whole, headers and body, before it is answered 408 and
   * its connection closed; the answer (an event stream included) is not bound by it.
   * @defaultValue 30000
   */
  REQUEST_TIMEOUT_MS: timerMs().default(30_000),
  /**
   * How long an idle keep-alive connection is kept open for the client's next request. Behind a
   * load balancer that reuses idle upstream connections, set it longer than the balancer's idle
   * timeout (Google Cloud's: 600 s), or it may reuse one at the moment the gateway closes it.
   * @defaultValue 65000
   */
  KEEP_ALIVE_TIMEOUT_MS: timerMs(1000, KEEP_ALIVE_TIMEOUT_MAX_MS, "Node waits 1 s past it on an idle connection, and a timer waits at most 2147483647 ms").default(65_000),
  /** Largest accepted request body. */
  BODY_LIMIT_BYTES: envInteger(1).default(1024 * 1024),
  REQUIRE_HTTPS: envBoolean.default(false),
  /**
   * Express `trust proxy` setting: false, true, a hop count, or a comma-separated list of
   * addresses, subnets (CIDR) and the names loopback, linklocal, uniquelocal.
   */
  TRUST_PROXY: z.string().default("false").transform(trustProxy),
  /**
   * On SIGTERM, after open streams are ended and waiting JSON answers are given their 202, how
   * long the remaining connections (requests still being handled) may stay before they are cut.
   */
  SHUTDOWN_STREAM_GRACE_MS: timerMs(0).default(2000),
  DB_POOL_SIZE: envInteger(1).default(10),
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
  DB_QUERY_TIMEOUT_MS: dbQueryTimeoutMs,
  /** Failed authentications per client IP (`req.ip`) in a sliding minute; further failures get 429, valid keys never do. */
  AUTH_FAILURE_LIMIT: envInteger(1).default(30),
  /** How often the API keys used since the last write get their `last_used_at` (one statement). */
  KEY_LAST_USED_FLUSH_MS: timerMs().default(10_000),
  /** PEM certificate chain; with TLS_KEY_FILE the gateway serves HTTPS itself. */
  TLS_CERT_FILE: readableFile.optional(),
  /** PEM private key of TLS_CERT_FILE. */
  TLS_KEY_FILE: readableFile.optional(),
  NODE_ENV: z.string().default("development"),
  /** Signs widget visitor tokens; set a long random value in production. */
  WIDGET_TOKEN_SECRET: z.string().min(32).default(DEV_WIDGET_TOKEN_SECRET),
  /** Lifetime of a visitor token, in seconds; every widget call returns a renewed one. */
  WIDGET_TOKEN_TTL_S: envInteger(1).default(86_400),
  /** Widget requests per minute per widget key (sliding window), apart from the API plan limit. */
  WIDGET_RPM_PER_KEY: envInteger(1).default(120),
  /** Widget requests per minute per client IP (`req.ip`, so TRUST_PROXY applies). */
  WIDGET_RPM_PER_IP: envInteger(1).default(20),
  /** Serve the `/widget-demo` page. @defaultValue true unless NODE_ENV=production */
  WIDGET_DEMO: envBoolean.optional(),
}).refine((c) => (c.TLS_CERT_FILE === undefined) === (c.TLS_KEY_FILE === undefined), {
  message: "set both TLS_CERT_FILE and TLS_KEY_FILE, or neither",
  path: ["TLS_CERT_FILE"],
});

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
