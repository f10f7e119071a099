import type { RequestHandler } from "express";
import { noRoute } from "./error.middleware";

/**
 * Answers OPTIONS with 404 `not_found`, like any other method a path does not serve. Without it,
 * an Express router that has the path for another method answers OPTIONS itself (200 text/plain
 * listing the methods), outside the contract's error shape. The API has no CORS to preflight:
 * secret keys never belong in a browser, and the widget gateway answers its own preflight.
 * Mount in front of every router whose paths it covers.
 */
export function refuseOptions(): RequestHandler {
  return (req, _res, next) => {
    if (req.method === "OPTIONS") throw noRoute("OPTIONS", req.originalUrl);
    next();
  };
}
