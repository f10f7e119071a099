/**
 * Redis connections by role. Each role gets its own connection because a subscriber cannot run
 * commands and BullMQ needs `maxRetriesPerRequest: null` for its blocking commands.
 */
import { Redis, type RedisOptions } from "ioredis";

export { Redis } from "ioredis";
export { logConnectionState, type ConnectionLogger } from "./connection-state";

export type RedisRole = "commands" | "subscriber" | "bullmq" | "publisher";

export interface CreateRedisOptions {
  url: string;
  role: RedisRole;
  /**
   * Receives connection errors (every failed reconnection attempt); without a listener ioredis
   * would print them unhandled. Services log outages with {@link logConnectionState} instead.
   */
  onError?: (err: Error, role: RedisRole) => void;
  /** Connection name, visible in CLIENT LIST. */
  name?: string;
}

/**
 * Creates a connection for one role. Command connections fail fast while Redis is down (no
 * offline queue beyond a short retry) so that requests answer 503 instead of hanging.
 */
export function createRedis({ url, role, onError, name }: CreateRedisOptions): Redis {
  const base: RedisOptions = {
    connectionName: name ? `${name}:${role}` : role,
    // Reconnect forever with a capped back-off: Redis coming back must heal every service.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    lazyConnect: false,
  };
  const byRole: Record<RedisRole, RedisOptions> = {
    // Commands issued in the same tick (many streams' reads, many runs' heartbeats) share one
    // socket write: on a loaded machine the count of writes, not their size, sets the cost.
    commands: { maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 2000, commandTimeout: 5000, enableAutoPipelining: true },
    publisher: { maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 2000, commandTimeout: 5000, enableAutoPipelining: true },
    // No ready check (INFO) and no CLIENT SETINFO on a subscriber: a SUBSCRIBE issued while the
    // connection is still in its handshake (status "connect", right after a start or a
    // reconnection) is written at once, and the handshake commands that followed it were then
    // refused in subscriber mode, which left the connection stuck short of "ready" for good
    // (ioredis issue #2037). CLIENT SETNAME is written before anything else can be.
    subscriber: { maxRetriesPerRequest: null, enableOfflineQueue: true, connectTimeout: 2000, enableReadyCheck: false, disableClientInfo: true },
    bullmq: { maxRetriesPerRequest: null, enableReadyCheck: false, connectTimeout: 2000 },
  };
  const client = new Redis(url, { ...base, ...byRole[role] });
  client.on("error", (err) => onError?.(err, role));
  return client;
}

/** Closes a connection, falling back to disconnect when Redis is unreachable. */
export async function closeRedis(client: Redis): Promise<void> {
  if (client.status === "end") return;
  try {
    await Promise.race([client.quit(), new Promise((_, rej) => setTimeout(() => rej(new Error("quit timeout")), 1000).unref())]);
  } catch {
    client.disconnect();
  }
}
