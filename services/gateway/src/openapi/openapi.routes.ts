import { Router } from "express";
import { buildOpenApiDocument } from "@agentrun/contracts/openapi";

/**
 * `GET /api/openapi.json` (and `/api/v1/openapi.json`): the OpenAPI 3.1 document, generated from
 * the contract's zod schemas. Public on purpose, like any published API reference: it needs no key,
 * names no tenant's data and is not rate-limited. Built on the first request, then kept.
 */
export function openApiRoutes(router: Router = Router()): Router {
  let body: string | undefined;
  router.get(["/api/openapi.json", "/api/v1/openapi.json"], (_req, res) => {
    body ??= JSON.stringify(buildOpenApiDocument());
    res.setHeader("Cache-Control", "public, max-age=300");
    res.type("application/json").send(body);
  });
  return router;
}
