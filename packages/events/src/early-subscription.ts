import { runChannel } from "./keys";
import type { MessageHandler, SubscriberHub } from "./subscriber-hub";

/**
 * A subscription to a run's channel opened before the run can emit anything (before its job is
 * queued). Messages that arrive before a reader attaches are kept for it. A reader that follows
 * a run from such a subscription needs no first read of the stored events: nothing can have been
 * published before the subscription was confirmed.
 */
export class EarlyRunSubscription {
  /** Resolves with the unsubscribe function once Redis has confirmed the subscription. */
  readonly ready: Promise<() => void>;
  private buffered: string[] = [];
  private handler: MessageHandler | null = null;
  private readonly closed = new AbortController();

  constructor(hub: SubscriberHub, redisPrefix: string, runId: string) {
    const onMessage = (message: string) => {
      if (this.handler) this.handler(message);
      else this.buffered.push(message);
    };
    this.ready = hub.subscribe(runChannel(redisPrefix, runId), onMessage, this.closed.signal);
    this.ready.catch(() => {}); // the caller learns of a failure by awaiting `ready`
  }

  /** Hands the messages received so far, then every later one, to `handler`. */
  attach(handler: MessageHandler): void {
    this.handler = handler;
    const earlier = this.buffered;
    this.buffered = [];
    for (const message of earlier) handler(message);
  }

  /** Drops the subscription (when the run was not created after all), confirmed or not. */
  close(): void {
    this.closed.abort();
    this.buffered = [];
    this.ready.then((unsubscribe) => unsubscribe(), () => {});
  }
}
