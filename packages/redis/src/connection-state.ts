import type { Redis } from "ioredis";

/** The part of a pino logger the connection watch writes to. */
export interface ConnectionLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * Logs a connection's outages rather than its retries: one warning when it goes down (the first
 * error since it was last ready, with its message and the connection's name), one info line,
 * `"redis reachable again"` with the outage's duration, when it is ready again. The errors of
 * every reconnection attempt in between (several a second, for as long as Redis is away) go to
 * debug: an outage of an hour is two lines, not thousands.
 *
 * `name` defaults to the connection's name (createRedis sets `<process>:<role>`).
 */
export function logConnectionState(client: Redis, logger: ConnectionLogger, name: string = client.options.connectionName ?? "redis"): void {
  /** When the outage being reported began; undefined while the connection is usable. */
  let downSince: number | undefined;
  client.on("error", (err: Error) => {
    if (downSince !== undefined) return logger.debug({ connection: name, err: err.message }, "redis still unreachable");
    downSince = Date.now();
    logger.warn({ connection: name, err: err.message }, "redis unreachable: retrying until it is back");
  });
  // Subscribers and BullMQ's connections skip the ready check: "ready" comes right after the
  // connection opens, so it means usable again for every role.
  client.on("ready", () => {
    if (downSince === undefined) return;
    const downForMs = Date.now() - downSince;
    downSince = undefined;
    logger.info({ connection: name, downForMs }, "redis reachable again");
  });
}
