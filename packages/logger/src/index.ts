/**
 * pino loggers for every service: JSON lines in production and tests, pretty output only when
 * stdout is a terminal. Secrets and payloads are redacted: fields by path, and the process's secret
 * values and bearer tokens wherever they appear in a line's text.
 */
import pino, { type Logger, type LoggerOptions } from "pino";
import { REDACTED, secretScrubber } from "./secret-scrubber";

export type { Logger } from "pino";

/** Paths removed from every log line: credentials, tokens and user content. */
export const REDACT_PATHS = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  'req.headers["x-widget-key"]',
  'req.headers["x-visitor-token"]',
  "apiKey",
  "*.apiKey",
  "api_key",
  "*.api_key",
  "token",
  "*.token",
  "password",
  "*.password",
  "query",
  "*.query",
  "prompt",
  "*.prompt",
  "messages",
  "*.messages",
  "params",
  "*.params",
  "result",
  "*.result",
  "content",
  "*.content",
];

export interface CreateLoggerOptions {
  /** Service name, put on every line. */
  service: string;
  /** @defaultValue "info" */
  level?: string;
  /** Pretty-print for a developer's terminal. @defaultValue stdout is a TTY */
  pretty?: boolean;
  /**
   * The process's secret values (model keys, internal tokens, signing secrets), replaced with
   * `[redacted]` wherever they appear in a line: an upstream error quoting a key puts it in an
   * error's message and stack, which no redact path reaches. Missing values and values shorter
   * than MIN_SECRET_LENGTH are ignored. Bearer tokens are replaced whether listed or not.
   * @defaultValue []
   */
  secrets?: readonly (string | undefined)[];
  /** Where the JSON lines go instead (`pretty` is then ignored). @defaultValue standard output */
  destination?: pino.DestinationStream;
}

export function createLogger({ service, level = "info", pretty = process.stdout.isTTY === true, secrets = [], destination }: CreateLoggerOptions): Logger {
  const options: LoggerOptions = {
    level,
    base: { service },
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    timestamp: pino.stdTimeFunctions.isoTime,
    // The serialized line, once: what every field, message and stack of it became.
    hooks: { streamWrite: secretScrubber(secrets) },
  };
  if (pretty && !destination) {
    return pino({ ...options, transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss.l" } } });
  }
  return pino(options, destination ?? stdoutDestination());
}

/**
 * Standard output as pino writes it (synchronously), which gives up on a closed pipe (the reader
 * of the logs gone: a log shipper that died, `| head`): sonic-boom would retry the write for ever
 * when pino flushes at exit, so that the process never exited, not even on SIGTERM.
 */
function stdoutDestination(): pino.DestinationStream {
  const dest = pino.destination({ dest: 1, sync: true });
  let closed = false;
  dest.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    closed = true;
  });
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => {
    if (!closed) flushSync();
  };
  const write = dest.write.bind(dest);
  dest.write = (chunk: string) => (closed ? true : write(chunk));
  return dest;
}
