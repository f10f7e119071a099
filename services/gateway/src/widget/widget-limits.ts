import type { RequestHandler } from "express";
import type { SlidingWindowLimiter } from "../rate-limit/sliding-window-limiter";
import { rateLimitedError, setRateLimitHeaders } from "../rate-limit/rate-limit-response";
import { widgetOf } from "./widget-context";

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
 * embedding site, use up what the organization's own integrations need. The address is checked
 * first, so one abusive visitor is refused before it eats into the key's budget. The headers
 * report whichever limit is closer to refusing.
 */
export function widgetLimits({ limiter, redisPrefix, perKey, perIp }: WidgetLimitOptions): RequestHandler {
  return async (req, res, next) => {
    const { key } = widgetOf(req);
    const byIp = await limiter.hit(`${redisPrefix}:rl:widget-ip:${req.ip ?? "unknown"}`, perIp);
    if (!byIp.admitted) {
      setRateLimitHeaders(res, byIp);
      throw rateLimitedError(byIp, `Over the limit of ${perIp} widget requests per minute from this address.`);
    }
    const byKey = await limiter.hit(`${redisPrefix}:rl:widget-key:${key.id}`, perKey);
    setRateLimitHeaders(res, byKey.admitted && byIp.remaining < byKey.remaining ? byIp : byKey);
    if (!byKey.admitted) throw rateLimitedError(byKey, `Over the limit of ${perKey} requests per minute for this widget.`);
    next();
  };
}
