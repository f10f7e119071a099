import type { Redis } from "ioredis";

export type MessageHandler = (message: string) => void;

/**
 * Multiplexes many channel subscriptions over one subscriber connection. `subscribe` resolves
 * once Redis has confirmed the subscription, so a caller that publishes or enqueues after it
 * cannot miss a message.
 */
export class SubscriberHub {
  private readonly handlers = new Map<string, Set<MessageHandler>>();
  private readonly pending = new Map<string, Promise<unknown>>();
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
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      const p = this.redis.subscribe(channel);
      this.pending.set(channel, p);
      set.add(handler);
      try {
        await p;
      } catch (err) {
        set.delete(handler);
        if (set.size === 0) this.handlers.delete(channel);
        throw err;
      } finally {
        if (this.pending.get(channel) === p) this.pending.delete(channel);
      }
    } else {
      set.add(handler);
      await this.pending.get(channel);
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const current = this.handlers.get(channel);
      if (!current) return;
      current.delete(handler);
      if (current.size === 0) {
        this.handlers.delete(channel);
        this.redis.unsubscribe(channel).catch(() => {});
      }
    };
  }

  /** Number of channels with at least one handler. */
  get channelCount(): number {
    return this.handlers.size;
  }
}
