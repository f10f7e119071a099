import helmet from "helmet";
import type { RequestHandler } from "express";

/**
 * helmet's security headers on every response. The API serves only JSON and event streams, so
 * the content policy allows nothing to load and nothing to frame it. HSTS is kept: browsers
 * ignore it over plain HTTP and honour it once the API is reached over HTTPS.
 */
export function securityHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
    frameguard: { action: "deny" },
  });
}
