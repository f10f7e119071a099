import type { RequestHandler } from "express";
import type { SlidingWindowLimiter } from "../rate-limit/sliding-window-limiter";
import { rateLimitedError, setRateLimitHeaders } from "../rate-limit/rate-limit-response";
import { rpmLimitOf } from "../rate-limit/plan-limits";
import { authOf } from "../request-context";

/** Redis key of an organization's request log. */
export const orgRateLimitKey = (redisPrefix: string, orgId: string) => `${redisPrefix}:rl:org:${orgId}`;

/**
 * Counts the request against its organization's requests per minute (sliding window shared by
 * every gateway instance through Redis) and refuses it with 429 when over the limit. Mounted
 * right after the auth middleware, so every response from here on, errors and streams included,
 * carries the rate-limit headers. A refused request is not counted. Redis down → 503.
 */
export function orgRateLimit(limiter: SlidingWindowLimiter, redisPrefix: string): RequestHandler {
  return async (req, res, next) => {
    const auth = authOf(req);
    const r = await limiter.hit(orgRateLimitKey(redisPrefix, auth.orgId), rpmLimitOf(auth.plan, auth.rpmLimit));
    setRateLimitHeaders(res, r);
    if (!r.admitted) throw rateLimitedError(r, `Over the organization's limit of ${r.limit} requests per minute.`);
    next();
  };
}
