import type { Redis } from "ioredis";

export type MessageHandler = (message: string) => void;

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
  /** Channels whose subscription Redis has not confirmed yet, and the SUBSCRIBE that carries them. */
  private readonly pending = new Map<string, Promise<unknown>>();
  private toSubscribe: string[] = [];
  /** The SUBSCRIBE of this turn's channels, sent from `setImmediate`. */
  private subscribing: Promise<unknown> | null = null;
  /** Channels without handlers whose UNSUBSCRIBE has not been sent: still subscribed in Redis. */
  private readonly toUnsubscribe = new Set<string>();
  private unsubscribeScheduled = false;
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

  /**
   * Subscribes `handler` to `channel`; returns the function that unsubscribes it. `signal` withdraws
   * the handler while Redis has not confirmed the subscription yet (which waits for Redis while it
   * is down): the promise then rejects, and nothing of the caller stays behind.
   */
  async subscribe(channel: string, handler: MessageHandler, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    let set = this.handlers.get(channel);
    if (set) {
      set.add(handler);
    } else {
      set = new Set([handler]);
      this.handlers.set(channel, set);
      // Left in this turn but not yet unsubscribed: the subscription is still in place.
      if (!this.toUnsubscribe.delete(channel)) {
        const confirming = this.subscribeSoon(channel);
        this.pending.set(channel, confirming);
        // Settled, it is no longer waited for (also when every caller gave up before that).
        const settled = () => {
          if (this.pending.get(channel) === confirming) this.pending.delete(channel);
        };
        confirming.then(settled, settled);
      }
    }
    const confirmed = this.pending.get(channel);
    if (confirmed) {
      const withdraw = () => {
        set.delete(handler);
        if (set.size > 0 || this.handlers.get(channel) !== set) return;
        this.handlers.delete(channel);
        // Subscribed in Redis once confirmed: left then, unless subscribed to again meanwhile.
        confirmed.then(
          () => {
            if (!this.handlers.has(channel)) this.unsubscribeSoon(channel);
          },
          () => {},
        );
      };
      let onAbort = () => {};
      const aborted = new Promise<never>((_, reject) => (onAbort = () => reject(signal?.reason)));
      aborted.catch(() => {});
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        await Promise.race([confirmed, aborted]);
      } catch (err) {
        withdraw();
        throw err;
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const current = this.handlers.get(channel);
      if (!current?.delete(handler) || current.size > 0) return;
      this.handlers.delete(channel);
      this.unsubscribeSoon(channel);
    };
  }

  /** Number of channels with at least one handler. */
  get channelCount(): number {
    return this.handlers.size;
  }

  /** Adds `channel` to this turn's SUBSCRIBE; resolves once Redis has confirmed it. */
  private subscribeSoon(channel: string): Promise<unknown> {
    this.toSubscribe.push(channel);
    this.subscribing ??= new Promise((resolve) => setImmediate(resolve)).then(() => {
      const channels = this.toSubscribe;
      this.toSubscribe = [];
      this.subscribing = null;
      return this.redis.subscribe(...channels);
    });
    return this.subscribing;
  }

  /** Adds `channel` to this turn's UNSUBSCRIBE, unless it is subscribed again before that leaves. */
  private unsubscribeSoon(channel: string): void {
    this.toUnsubscribe.add(channel);
    if (this.unsubscribeScheduled) return;
    this.unsubscribeScheduled = true;
    setImmediate(() => {
      this.unsubscribeScheduled = false;
      const channels = [...this.toUnsubscribe];
      this.toUnsubscribe.clear();
      if (channels.length > 0) this.redis.unsubscribe(...channels).catch(() => {});
    });
  }
}
