import type { Response } from "express";
import { AppError } from "@agentrun/errors";
import type { RateLimitResult, RateLimitState } from "./sliding-window-limiter";

/** Whole seconds until `ms` have passed, rounded up. */
const ceilSeconds = (ms: number) => Math.ceil(ms / 1000);

/**
 * Sets `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`. The reset value is
 * the whole number of seconds (rounded up) until a request would be admitted again: 0 while the
 * window has room, at least 1 once it is full.
 */
export function setRateLimitHeaders(res: Response, r: RateLimitState): void {
  res.setHeader("X-RateLimit-Limit", String(r.limit));
  res.setHeader("X-RateLimit-Remaining", String(r.remaining));
  res.setHeader("X-RateLimit-Reset", String(ceilSeconds(r.retryAfterMs)));
}

/** 429 `rate_limited` with `Retry-After` in whole seconds, at least 1. */
export function rateLimitedError(r: RateLimitResult, message: string): AppError {
  return new AppError("rate_limited", { message, headers: { "Retry-After": String(Math.max(1, ceilSeconds(r.retryAfterMs))) } });
}
