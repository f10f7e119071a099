import { AppError } from "@agentrun/errors";
import { clientAddressKey } from "./client-address";
import type { SlidingWindowLimiter } from "./sliding-window-limiter";
import { rateLimitedError } from "./rate-limit-response";

/** Decides how the auth middleware answers a failed authentication. */
export interface AuthFailureGuard {
  /**
   * Records a failed authentication from the request's client address (`req.ip`, which honours
   * TRUST_PROXY, bucketed by {@link clientAddressKey}) and returns the error to answer: `error` (401
   * `unauthorized`, or 403 for a widget's disallowed origin) while the address is within its
   * limit, 429 `rate_limited` beyond it.
   */
  reject(req: { ip?: string }, error: AppError): Promise<AppError>;
}

export interface AuthFailureGuardOptions {
  limiter: SlidingWindowLimiter;
  redisPrefix: string;
  /** Failed authentications per client address and window; further failures get 429. */
  limit: number;
}

/**
 * Limits failed authentications per client address (`req.ip`, which honours TRUST_PROXY; an IPv6
 * client counts as its /64, see {@link clientAddressKey}).
 * Only failures are counted and only failures are refused: a request with a valid key is never
 * blocked by it, so a client sharing an address (NAT, proxy) with a key guesser keeps working.
 * Beyond the limit a failure is answered 429 with Retry-After instead of 401, telling a
 * misconfigured client to back off; keys are long random values, so guessing stays hopeless either way.
 */
export function authFailureGuard({ limiter, redisPrefix, limit }: AuthFailureGuardOptions): AuthFailureGuard {
  return {
    async reject(req, error) {
      const r = await limiter.hit(`${redisPrefix}:rl:authfail:${clientAddressKey(req.ip)}`, limit);
      if (r.admitted) return error;
      return rateLimitedError(r, "Too many failed authentication attempts from this address; retry later.");
    },
  };
}
