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

  /** Subscribes `handler` to `channel`; returns the function that unsubscribes it. */
  async subscribe(channel: string, handler: MessageHandler): Promise<() => void> {
    let set = this.handlers.get(channel);
    if (set) {
      set.add(handler);
    } else {
      set = new Set([handler]);
      this.handlers.set(channel, set);
      // Left in this turn but not yet unsubscribed: the subscription is still in place.
      if (!this.toUnsubscribe.delete(channel)) this.pending.set(channel, this.subscribeSoon(channel));
    }
    const confirmed = this.pending.get(channel);
    if (confirmed) {
      try {
        await confirmed;
      } catch (err) {
        set.delete(handler);
        if (set.size === 0 && this.handlers.get(channel) === set) this.handlers.delete(channel);
        throw err;
      } finally {
        if (this.pending.get(channel) === confirmed) this.pending.delete(channel);
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
