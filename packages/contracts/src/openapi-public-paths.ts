/**
 * The operations of the OpenAPI document that do not take an API key: the widget gateway (a
 * publishable widget key and a visitor token), the widget script and the health probes.
 */
import { z } from "zod";
import type { ZodOpenApiPathsObject, ZodOpenApiResponsesObject } from "zod-openapi";
import { runEventSchema } from "./events";
import { eventsQuerySchema, lastEventIdSchema } from "./tasks";
import { widgetRunRequestSchema } from "./widget";
import { idempotencyKeySchema } from "./tasks";
import { AFTER_THE_END, errorBodySchema, intHeader, runAcceptedSchema, runPathSchema, runResultSchema, runViewSchema } from "./openapi-schemas";

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
const requestId = { "X-Request-Id": ref("headers", "X-Request-Id") };
const visitorToken = { "X-Visitor-Token": ref("headers", "X-Visitor-Token") };
/** The widget limits' headers: they report whichever of the two limits is closer to refusing. */
const widgetRateLimit = {
  "X-RateLimit-Limit": intHeader("Requests per minute of the widget limit closer to refusing: the client address's or the widget key's."),
  "X-RateLimit-Remaining": intHeader("Requests still allowed by that limit in the current sliding window."),
  "X-RateLimit-Reset": ref("headers", "X-RateLimit-Reset"),
};
const widgetHeaders = { ...requestId, ...visitorToken, ...widgetRateLimit };
/** An answer that may be an event stream. */
const widgetStreamHeaders = { ...widgetHeaders, "X-Heartbeat-Interval-Ms": ref("headers", "X-Heartbeat-Interval-Ms") };

/** A CORS preflight of a widget route (`path`: the route's path parameters). */
const preflight = (operationId: string, path?: typeof runPathSchema) => ({
  operationId,
  tags: ["Widget"],
  summary: "CORS preflight",
  description: "Answered for an Origin that at least one widget key allows, revoked or not (so that the request after it gets a 401 the page can read); any other Origin gets 403 without CORS headers (and counts as a failed authentication of the address). Browsers send it without credentials.",
  security: [],
  requestParams: {
    ...(path ? { path } : {}),
    header: z.object({ Origin: z.string().meta({ description: "The page's origin." }), "Access-Control-Request-Method": z.string().optional() }),
  },
  responses: {
    "204": {
      description: "The origin may call this route.",
      headers: {
        "Access-Control-Allow-Origin": { description: "The request's Origin.", schema: { type: "string" as const } },
        "Access-Control-Allow-Methods": { description: "GET, POST, OPTIONS.", schema: { type: "string" as const } },
        "Access-Control-Allow-Headers": { description: "Content-Type, X-Widget-Key, X-Visitor-Token, Last-Event-ID, Idempotency-Key, X-Request-Id.", schema: { type: "string" as const } },
        "Access-Control-Max-Age": intHeader("Seconds the browser may cache this answer (600)."),
      },
    },
    "403": ref("responses", "WidgetForbidden"),
    "429": ref("responses", "WidgetTooManyRequests"),
    "503": ref("responses", "Unavailable"),
  },
});

const visitorTokenField = z.string().meta({ description: "The visitor's session token, to send with the next requests (also in the X-Visitor-Token header)." });
export const widgetRunResultSchema = runResultSchema.extend({ visitor_token: visitorTokenField });
export const widgetRunAcceptedSchema = runAcceptedSchema.extend({ visitor_token: visitorTokenField });
export const widgetRunViewSchema = runViewSchema.extend({ visitor_token: visitorTokenField });

/** Errors of the widget gateway, in its order of checks. */
const WIDGET_ERRORS: ZodOpenApiResponsesObject = {
  "400": ref("responses", "BadRequest"),
  "401": ref("responses", "WidgetUnauthorized"),
  "403": ref("responses", "WidgetForbidden"),
  "404": ref("responses", "NotFound"),
  "429": ref("responses", "WidgetTooManyRequests"),
  "500": ref("responses", "InternalError"),
  "503": ref("responses", "Unavailable"),
};

const STREAM =
  "text/event-stream of RunEvent, framed as on `POST /api/run` (`id: <seq>`, `data: <json>`, `: ping` while idle, one terminal event at the end).";

export const healthSchema = z.object({ status: z.literal("ok") });
export const readySchema = z.object({
  status: z.literal("ready"),
  checks: z.object({ database: z.literal("ok"), redis: z.literal("ok"), workers: z.number().int().meta({ description: "Worker processes with a fresh heartbeat: each heartbeats only while it reaches its own database." }) }),
});

export function publicOpenApiPaths(): ZodOpenApiPathsObject {
  return {
    "/api/v1/widget/run": {
      post: {
        operationId: "widgetRun",
        tags: ["Widget"],
        summary: "Run the agent for a web page visitor",
        description:
          "For chat widgets embedded in web pages (also served as `/api/widget/run`). Authenticates with a publishable widget key (`X-Widget-Key`) whose allowed origins include the request's `Origin`; CORS preflights are answered for allowed origins only. Without `X-Visitor-Token` a new visitor is created (unless the request repeats, by its `Idempotency-Key`, a new visitor's request); the answer always carries the visitor's (renewed) token. The run's `context.user_id` is the visitor, so memories are the visitor's own, and a visitor can continue or read only its own tasks. Limited per widget key and per client address; widget requests do not count against the organization's plan limit.",
        security: [{ widgetKey: [] }],
        requestParams: {
          header: z.object({
            Origin: z.string().optional().meta({ description: "The page's origin, one of the widget key's allowed origins (browsers send it); not needed on a same-origin request (`Sec-Fetch-Site: same-origin`)." }),
            "X-Visitor-Token": z.string().optional().meta({ description: "The token from an earlier answer." }),
            "Idempotency-Key": idempotencyKeySchema.optional().meta({
              description:
                "Kept per widget key and per visitor (requests without a token count as one more visitor), for 24 h: the same key with the same body returns the run the first request started instead of starting another, with that run's visitor token (a new visitor's first request is also found by its repeat with the token it started); another body is 409 `idempotency_conflict`. Another visitor's request with the same key starts its own run. Use unguessable keys: a repeat without a token gets the token of the visitor its first request started, within 10 minutes of that request and while that visitor has no other run (otherwise 409 `idempotency_conflict`).",
            }),
          }),
        },
        requestBody: { required: true, content: { "application/json": { schema: widgetRunRequestSchema } } },
        responses: {
          "200": {
            description: `\`stream: true\` (default): ${STREAM} \`stream: false\`: the finished run with its tool calls and the visitor token.`,
            headers: widgetStreamHeaders,
            content: { "text/event-stream": { schema: runEventSchema }, "application/json": { schema: widgetRunResultSchema } },
          },
          "202": {
            description: "`stream: false` and the run outlasted the wait limit (or the gateway instance shut down).",
            headers: widgetHeaders,
            content: { "application/json": { schema: widgetRunAcceptedSchema } },
          },
          ...WIDGET_ERRORS,
          "402": ref("responses", "PaymentRequired"),
          "409": ref("responses", "Conflict"),
          "413": ref("responses", "PayloadTooLarge"),
          "415": ref("responses", "UnsupportedMediaType"),
        },
      },
      options: preflight("widgetRunPreflight"),
    },
    "/api/v1/widget/tasks/{task_id}/runs/{run_id}/events": {
      get: {
        operationId: "widgetRunEvents",
        tags: ["Widget"],
        summary: "Replay and follow a run of the visitor's own task",
        description: "Re-attaches a widget after a page reload (also served under `/api/widget/`): what is stored after `Last-Event-ID` (or `after`), then the live events to the terminal one. Needs the visitor token.",
        security: [{ widgetKey: [] }],
        requestParams: {
          path: runPathSchema,
          query: eventsQuerySchema,
          header: z.object({
            Origin: z.string().optional().meta({ description: "The page's origin, one of the widget key's allowed origins; not needed on a same-origin request (`Sec-Fetch-Site: same-origin`)." }),
            "X-Visitor-Token": z.string().meta({ description: "The visitor's token." }),
            "Last-Event-ID": lastEventIdSchema.optional().meta({ description: "Resume after this seq." }),
          }),
        },
        responses: {
          "200": { description: STREAM, headers: widgetStreamHeaders, content: { "text/event-stream": { schema: runEventSchema } } },
          "204": { description: AFTER_THE_END, headers: widgetHeaders },
          ...WIDGET_ERRORS,
          // A body, whatever the method, must be JSON within the limit.
          "413": ref("responses", "PayloadTooLarge"),
          "415": ref("responses", "UnsupportedMediaType"),
        },
      },
      options: preflight("widgetRunEventsPreflight", runPathSchema),
    },
    "/api/v1/widget/tasks/{task_id}/runs/{run_id}/cancel": {
      post: {
        operationId: "widgetCancelRun",
        tags: ["Widget"],
        summary: "Stop a run of the visitor's own task",
        description:
          "The widget's Stop button (also served under `/api/widget/`): `POST /api/tasks/{task_id}/runs/{run_id}/cancel` for the visitor. No body (a JSON body with any field is 400). Needs the visitor token (401 without one, before the limits); another visitor's task is 403. The run's stream then ends with `run_cancelled`; a run that has already ended is answered unchanged.",
        security: [{ widgetKey: [] }],
        requestParams: {
          path: runPathSchema,
          header: z.object({
            Origin: z.string().optional().meta({ description: "The page's origin, one of the widget key's allowed origins (browsers send it); not needed on a same-origin request (`Sec-Fetch-Site: same-origin`)." }),
            "X-Visitor-Token": z.string().meta({ description: "The visitor's token." }),
          }),
        },
        responses: {
          "202": {
            description: "The run as it is now, with the visitor's renewed token. A queued run is cancelled at once, a running one within moments; either ends with run_cancelled.",
            headers: widgetHeaders,
            content: { "application/json": { schema: widgetRunViewSchema } },
          },
          ...WIDGET_ERRORS,
          "413": ref("responses", "PayloadTooLarge"),
          "415": ref("responses", "UnsupportedMediaType"),
        },
      },
      options: preflight("widgetCancelRunPreflight", runPathSchema),
    },
    "/widget.js": {
      get: {
        operationId: "widgetScript",
        tags: ["Widget"],
        summary: "The embeddable chat widget",
        description: 'Load it with `<script src="…/widget.js" data-widget-key="pk_…" defer></script>`. Cacheable (5 minutes, then revalidated with its ETag); loadable from any site.',
        security: [],
        responses: {
          "200": {
            description: "The script.",
            headers: { ETag: { description: "The script's version; send it back as If-None-Match to revalidate.", schema: { type: "string" } } },
            content: { "application/javascript": { schema: { type: "string" } } },
          },
          "304": { description: "Not modified: the If-None-Match names the current version." },
          "403": ref("responses", "HttpsRequired"),
        },
      },
    },
    "/widget-demo": {
      get: {
        operationId: "widgetDemoPage",
        tags: ["Widget"],
        summary: "A page that embeds the widget, for trying a widget key",
        description: "Served only when `WIDGET_DEMO` is on (by default everywhere but `NODE_ENV=production`; 404 otherwise). `?key=pk_…` names the widget key to load; the gateway's own origin must be among that key's allowed origins.",
        security: [],
        parameters: [{ name: "key", in: "query", required: false, description: "A publishable widget key (`pk_…`).", schema: { type: "string" } }],
        responses: {
          "200": { description: "The page.", content: { "text/html": { schema: { type: "string" } } } },
          "403": ref("responses", "HttpsRequired"),
        },
      },
    },
    "/healthz": {
      get: {
        operationId: "health",
        tags: ["Meta"],
        summary: "Liveness: the gateway process answers",
        security: [],
        responses: { "200": { description: "Alive.", content: { "application/json": { schema: healthSchema } } } },
      },
    },
    "/readyz": {
      get: {
        operationId: "ready",
        tags: ["Meta"],
        summary: "Readiness: PostgreSQL (with this code's migrations) and Redis answer, and at least one worker is alive; each check within 0.9 s",
        security: [],
        responses: {
          "200": { description: "Ready.", content: { "application/json": { schema: readySchema } } },
          "503": { description: "Not ready: `error.details` has the checks (`database`: ok, not_migrated or unavailable; `redis`: ok or unavailable; `workers`: count), or shutting down (no details: the instance is stopping, SIGTERM).", content: { "application/json": { schema: errorBodySchema } } },
        },
      },
    },
  };
}
