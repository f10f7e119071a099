import type { Request, RequestHandler, Response } from "express";
import { AppError } from "@agentrun/errors";
import type { AuthFailureGuard } from "../rate-limit/auth-failure-guard";
import { normalizeOrigin, type WidgetKeyCache } from "./widget-key-cache";

/** Request headers a widget page may send. */
export const WIDGET_ALLOWED_HEADERS = "Content-Type, X-Widget-Key, X-Visitor-Token, Last-Event-ID, Idempotency-Key, X-Request-Id";
/** Response headers a widget page may read (the session token, the request id for support, the limits, the streams' ping interval). */
export const WIDGET_EXPOSED_HEADERS = "X-Visitor-Token, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, X-Heartbeat-Interval-Ms";
export const WIDGET_ALLOWED_METHODS = "GET, POST, OPTIONS";
/**
 * How long a browser may reuse a preflight answer. Short, because the preflight is decided on
 * "some key allows this origin"; the real request is still checked against its own key.
 * @defaultValue 600
 */
export const PREFLIGHT_MAX_AGE_S = 600;

/**
 * The origin a request comes from: its `Origin` header, or else the gateway's own origin, as
 * `req.protocol` and `req.host` see it (TRUST_PROXY decides whether X-Forwarded-Proto and
 * X-Forwarded-Host count). Browsers omit Origin only on same-origin GET and HEAD requests (e.g. a
 * widget hosted on the gateway's own domain re-attaching to a run): a cross-origin request that
 * carries X-Widget-Key is a CORS request, which always has one. Fetch Metadata is not sent
 * everywhere (not to plain-http hosts other than localhost, not by older Safari), so a GET or
 * HEAD without Origin is taken as same-origin unless `Sec-Fetch-Site` says otherwise; other
 * methods need `Sec-Fetch-Site: same-origin`. Null otherwise: a widget request must show which
 * page it serves.
 */
export function requestOrigin(req: Request): string | null {
  const origin = req.get("origin");
  if (origin !== undefined) return normalizeOrigin(origin);
  const site = req.get("sec-fetch-site");
  const safeMethod = req.method === "GET" || req.method === "HEAD";
  if (site === "same-origin" || (site === undefined && safeMethod)) return normalizeOrigin(`${req.protocol}://${req.host ?? ""}`);
  return null;
}

/** Lets the page at `origin` read this response (and its exposed headers). */
export function setCorsHeaders(res: Response, origin: string): void {
  res.setHeader("Access-Control-Allow-Origin", origin);
  res.setHeader("Access-Control-Expose-Headers", WIDGET_EXPOSED_HEADERS);
}

/**
 * Answers CORS preflights of the widget routes. A preflight carries no widget key, so it is
 * answered for an origin that at least one widget key allows (revoked or not: the real request
 * then gets its key's 401 with CORS headers, which the page can read); any other origin gets
 * 403 without CORS headers and the browser never sends the real request. A refusal counts as a
 * failed authentication of the client's address (429 beyond the limit).
 */
export function widgetPreflight(keys: WidgetKeyCache, failures: AuthFailureGuard): RequestHandler {
  return async (req, res) => {
    res.vary("Origin");
    const origin = requestOrigin(req);
    if (!origin || !(await keys.anyKeyAllows(origin))) {
      throw await failures.reject(req, new AppError("forbidden", { message: "This origin may not use the widget API." }));
    }
    res.setHeader("Access-Control-Allow-Origin", origin);
    res.setHeader("Access-Control-Allow-Methods", WIDGET_ALLOWED_METHODS);
    res.setHeader("Access-Control-Allow-Headers", WIDGET_ALLOWED_HEADERS);
    res.setHeader("Access-Control-Max-Age", String(PREFLIGHT_MAX_AGE_S));
    res.status(204).end();
  };
}
