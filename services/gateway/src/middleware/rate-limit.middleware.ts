import type { ErrorRequestHandler, RequestHandler } from "express";
import type { SlidingWindowLimiter } from "../rate-limit/sliding-window-limiter";
import { rateLimitedError, setRateLimitHeaders } from "../rate-limit/rate-limit-response";
import { rpmLimitOf } from "../rate-limit/plan-limits";
import { authOf } from "../request-context";
import { answeredByStop } from "../shutdown";

/** Redis key of an organization's request log. */
export const orgRateLimitKey = (redisPrefix: string, orgId: string) => `${redisPrefix}:rl:org:${orgId}`;

/**
 * Counts the request against its organization's requests per minute (sliding window shared by
 * every gateway instance through Redis) and refuses it with 429 when over the limit. Mounted
 * right after the auth middleware (and {@link orgRateLimitOnAgentRefusal}), so every response
 * from here on, errors and streams included, carries the rate-limit headers. A refused request is
 * not counted. Redis down → 503.
 */
export function orgRateLimit(limiter: SlidingWindowLimiter, redisPrefix: string): RequestHandler {
  return async (req, res, next) => {
    // Answered 503 by the gateway's stop while it authenticated: it is not counted.
    if (answeredByStop(res)) return;
    const auth = authOf(req);
    const r = await limiter.hit(orgRateLimitKey(redisPrefix, auth.orgId), rpmLimitOf(auth.plan, auth.rpmLimit));
    setRateLimitHeaders(res, r);
    if (!r.admitted) throw rateLimitedError(r, `Over the organization's limit of ${r.limit} requests per minute.`);
    next();
  };
}

/**
 * An error handler mounted right after the auth middleware, so it sees only that middleware's
 * refusals. When the key was accepted and the agent check refused the request (400/404/403, which
 * the contract puts before the rate limit), the answer still carries the organization's rate-limit
 * headers: its window as it stands, read without counting the request. Should Redis not answer,
 * the refusal goes out without them rather than turning into a 503.
 */
export function orgRateLimitOnAgentRefusal(limiter: SlidingWindowLimiter, redisPrefix: string): ErrorRequestHandler {
  return async (err, req, res, next) => {
    const key = req.apiKey;
    if (key) {
      try {
        setRateLimitHeaders(res, await limiter.peek(orgRateLimitKey(redisPrefix, key.orgId), rpmLimitOf(key.plan, key.rpmLimit)));
      } catch (peekErr) {
        req.log.warn({ err: peekErr }, "rate-limit state unavailable for a refused agent check");
      }
    }
    next(err);
  };
}
