import type { RequestHandler } from "express";
import type { SlidingWindowLimiter } from "../rate-limit/sliding-window-limiter";
import { rateLimitedError, setRateLimitHeaders } from "../rate-limit/rate-limit-response";
import { clientAddressKey } from "../rate-limit/client-address";
import { widgetOf } from "./widget-context";
import { answeredByStop } from "../shutdown";

export interface WidgetLimitOptions {
  limiter: SlidingWindowLimiter;
  redisPrefix: string;
  /** Requests per window per widget key (WIDGET_RPM_PER_KEY). */
  perKey: number;
  /** Requests per window per client address (WIDGET_RPM_PER_IP). */
  perIp: number;
}

/**
 * Limits widget requests per client address and per widget key, over the shared sliding window,
 * apart from the organization's API plan limit: a public page must not let one visitor, or one
 * embedding site, use up what the organization's own integrations need. A request is admitted
 * only when both windows have room, and a refused one counts in neither (one atomic check): a
 * visitor refused by an exhausted key keeps its budget for other keys, and one refused for its
 * address does not eat into the key's. The address is `req.ip` bucketed by
 * {@link clientAddressKey} (an IPv6 client counts as its /64). The headers report whichever limit
 * is closer to refusing (of two as close, the one that frees up last); on a refusal, the one that
 * frees up last.
 */
export function widgetLimits({ limiter, redisPrefix, perKey, perIp }: WidgetLimitOptions): RequestHandler {
  return async (req, res, next) => {
    // Answered 503 by the gateway's stop while it authenticated: it is not counted.
    if (answeredByStop(res)) return;
    const { key } = widgetOf(req);
    const [byIp, byKey] = await limiter.hitAll([
      { key: `${redisPrefix}:rl:widget-ip:${clientAddressKey(req.ip)}`, limit: perIp },
      { key: `${redisPrefix}:rl:widget-key:${key.id}`, limit: perKey },
    ]);
    if (byIp.admitted) {
      // Of two as close (both used up by this request, say), the one whose wait is longer.
      const ipCloser = byIp.remaining < byKey.remaining || (byIp.remaining === byKey.remaining && byIp.retryAfterMs >= byKey.retryAfterMs);
      setRateLimitHeaders(res, ipCloser ? byIp : byKey);
      return next();
    }
    // Only a full window has a wait; when both are full, the request fits once the longer one ends.
    const [refusing, message] =
      byIp.retryAfterMs >= byKey.retryAfterMs
        ? [byIp, `Over the limit of ${perIp} widget requests per minute from this address.`]
        : [byKey, `Over the limit of ${perKey} requests per minute for this widget.`];
    setRateLimitHeaders(res, refusing);
    throw rateLimitedError(refusing, message);
  };
}
