import type { RequestHandler, Response } from "express";
import { AppError } from "@agentrun/errors";
import { looksLikeWidgetKey } from "@agentrun/api-keys";
import type { AuthFailureGuard } from "../rate-limit/auth-failure-guard";
import type { VisitorTokens } from "./visitor-token";
import type { WidgetKeyCache } from "./widget-key-cache";
import { requestOrigin, setCorsHeaders } from "./widget-cors";
import { beforeStopAnswer } from "../shutdown";

/**
 * Authenticates a widget request: the publishable key in X-Widget-Key (401 when unknown or
 * revoked), then the request's origin against the key's allowed origins (403 otherwise, also
 * when there is no Origin), then the visitor token when one is sent (401 when forged, expired
 * or minted for another widget key). CORS headers are added as soon as a known key, revoked
 * included, allows the request's origin, so that the page can read every answer from then on:
 * the 401 of a revoked key, the 429 of too many failed authentications, and later a 402 or a 403
 * of a task. An unknown key allows no origin, so its refusal carries no CORS headers (a failed
 * lookup, which checked no key, carries them for any origin).
 * Each refusal counts as a failed authentication of the client's address (`failures`): beyond
 * the limit the answer is 429, as on the API routes.
 */
export function widgetAuth(keys: WidgetKeyCache, tokens: VisitorTokens, failures: AuthFailureGuard): RequestHandler {
  return async (req, res, next) => {
    res.vary("Origin");
    const refuse = (error: AppError) => failures.reject(req, error);
    const value = req.get("x-widget-key");
    const origin = requestOrigin(req);
    // An answer the gateway's stop gives while the key is looked up is an outage's (see lookUp).
    if (origin !== null) beforeStopAnswer(res, () => setCorsHeaders(res, origin));
    const key = looksLikeWidgetKey(value) ? await lookUp(keys, value, res, origin) : null;
    const allowed = key !== null && origin !== null && key.allowedOrigins.has(origin);
    if (allowed) setCorsHeaders(res, origin);
    if (!key || key.revoked) throw await refuse(new AppError("unauthorized", { message: "Missing, unknown or revoked widget key (X-Widget-Key)." }));
    if (!allowed) throw await refuse(new AppError("forbidden", { message: "This widget key may not be used from this origin." }));

    const token = req.get("x-visitor-token");
    let visitorId: string | null = null;
    if (token !== undefined) {
      const payload = tokens.verify(token);
      if (!payload || payload.widget_key_id !== key.id) throw await refuse(new AppError("unauthorized", { message: "The visitor token is invalid or expired." }));
      visitorId = payload.visitor_id;
    }
    req.widget = { key, origin, visitorId };
    req.credential = { id: value!, checker: keys };
    next();
  };
}

/**
 * The key's entry. When the lookup itself fails (the key store out of reach: 503), the answer
 * carries CORS headers for the request's origin whatever it is, so that the page can read the
 * 503 (an outage to retry, not a refusal): it holds nothing but the outage, and no key was checked.
 */
async function lookUp(keys: WidgetKeyCache, value: string, res: Response, origin: string | null) {
  try {
    return await keys.byKey(value);
  } catch (err) {
    if (origin !== null) setCorsHeaders(res, origin);
    throw err;
  }
}
