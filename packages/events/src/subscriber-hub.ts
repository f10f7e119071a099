import type { Redis } from "ioredis";

export type MessageHandler = (message: string) => void;

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Multiplexes many channel subscriptions over one subscriber connection. `subscribe` resolves
 * once Redis has confirmed the subscription, so a caller that publishes or enqueues after it
 * cannot miss a message.
 *
 * Every stream subscribes to its run's channel and unsubscribes at its end. The channels asked
 * for, or left, during one turn of the event loop go to Redis as one SUBSCRIBE and one
 * UNSUBSCRIBE command (sent from `setImmediate`, after the turn's I/O callbacks): a command per
 * channel costs a socket write in the gateway and a reply from Redis for every run.
 */
export class SubscriberHub {
  private readonly handlers = new Map<string, Set<MessageHandler>>();
  /** Channels whose subscription Redis has not confirmed yet, and the promise that says when it has. */
  private readonly pending = new Map<string, Deferred>();
  private toSubscribe: string[] = [];
  /** Channels without handlers whose UNSUBSCRIBE has not been sent: still subscribed in Redis. */
  private readonly toUnsubscribe = new Set<string>();
  private flushScheduled = false;
  private readonly resyncListeners = new Set<() => void>();
  private connected: boolean;

  constructor(private readonly redis: Redis) {
    redis.on("message", (channel: string, message: string) => {
      const set = this.handlers.get(channel);
      if (!set) return;
      for (const h of set) h(message);
    });
    this.connected = redis.status === "ready";
    redis.on("ready", () => {
      if (!this.connected) {
        this.connected = true; // the first connection: nothing was missed
        return;
      }
      // A reconnection: ioredis re-subscribes right after this event, and the PING's answer
      // comes after those subscriptions are in place. Whatever was published while the
      // connection was down is lost: the followers read what they missed.
      redis.ping().then(
        () => {
          for (const listener of this.resyncListeners) listener();
        },
        () => {},
      );
    });
  }

  /** Calls `listener` after each reconnection, once the channels are subscribed again; returns the function that removes it. */
  onResync(listener: () => void): () => void {
    this.resyncListeners.add(listener);
    return () => this.resyncListeners.delete(listener);
  }

  /** Subscribes `handler` to `channel`; returns the function that unsubscribes it. */
  async subscribe(channel: string, handler: MessageHandler): Promise<() => void> {
    let set = this.handlers.get(channel);
    let confirmed = this.pending.get(channel);
    if (set) {
      set.add(handler);
    } else {
      set = new Set([handler]);
      this.handlers.set(channel, set);
      // Left in this turn but not yet unsubscribed: the subscription is still in place.
      if (!this.toUnsubscribe.delete(channel)) {
        confirmed = deferred();
        this.pending.set(channel, confirmed);
        this.toSubscribe.push(channel);
        this.scheduleFlush();
      }
    }
    if (confirmed) {
      try {
        await confirmed.promise;
      } catch (err) {
        set.delete(handler);
        if (set.size === 0 && this.handlers.get(channel) === set) this.handlers.delete(channel);
        throw err;
      }
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const current = this.handlers.get(channel);
      if (!current?.delete(handler) || current.size > 0) return;
      this.handlers.delete(channel);
      this.toUnsubscribe.add(channel);
      this.scheduleFlush();
    };
  }

  /** Number of channels with at least one handler. */
  get channelCount(): number {
    return this.handlers.size;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.toUnsubscribe.size > 0) {
      const channels = [...this.toUnsubscribe];
      this.toUnsubscribe.clear();
      this.redis.unsubscribe(...channels).catch(() => {});
    }
    if (this.toSubscribe.length > 0) {
      const channels = this.toSubscribe;
      this.toSubscribe = [];
      this.redis.subscribe(...channels).then(
        () => this.settle(channels),
        (err: unknown) => this.settle(channels, err),
      );
    }
  }

  private settle(channels: string[], err?: unknown): void {
    for (const channel of channels) {
      const confirmed = this.pending.get(channel);
      this.pending.delete(channel);
      if (err === undefined) confirmed?.resolve();
      else confirmed?.reject(err);
    }
  }
}
