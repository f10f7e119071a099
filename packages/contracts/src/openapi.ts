/**
 * The public API's OpenAPI 3.1 document, generated from the same zod schemas that validate
 * requests (zod-openapi renders them with zod 4's own JSON Schema support). Exported on the
 * `@agentrun/contracts/openapi` entry point so that services which never serve it do not load it.
 */
import { z } from "zod";
import { createDocument, type CreateDocumentOptions, type ZodOpenApiObject } from "zod-openapi";
import { runEventSchema } from "./events";
import { memoryCreateSchema, memoryEntrySchema } from "./memory";
import { runRequestSchema } from "./runs";
import { openApiPaths } from "./openapi-paths";
import { publicOpenApiPaths } from "./openapi-public-paths";
import {
  errorBodySchema,
  intHeader,
  messageViewSchema,
  runResultSchema,
  runViewSchema,
  taskDetailSchema,
  taskViewSchema,
} from "./openapi-schemas";

export type OpenApiDocument = ReturnType<typeof createDocument>;

const DESCRIPTION = `Runs configured AI agents, streaming their answers as Server-Sent Events or returning them as JSON.

Every \`/api/...\` path is also served under \`/api/v1/...\`. Requests authenticate with \`Authorization: Bearer <API key>\` and name an agent with \`X-Agent-Id\`; this document itself (\`GET /api/openapi.json\`) needs neither.

Checks run in this order: authentication (401) → agent (400 missing header / 404 / 403) → rate limit (429) → body and parameters (400/413/415) → resources (404/403/409) → credits (402). An unknown path or method under \`/api\` is 404 \`not_found\` once the key, the agent and the rate limit have passed. With \`REQUIRE_HTTPS\` on, a request that did not arrive over TLS is refused before all of these: 403 \`https_required\`, without rate-limit headers (the health probes excepted).

Rate limit: per organization over a sliding 60-second window (Free 10, Starter 60, Pro 300 requests per minute, Enterprise its own figure). Every response to a request with a valid API key carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset, the 400/404/403 of the agent check included (such a refusal does not count against the limit), but for a 503 when the limit cannot be read (Redis out of reach); a 429 adds Retry-After. Failed authentications are also limited per client address: beyond that limit they get 429 with Retry-After only, since they belong to no organization.

Every response carries X-Request-Id: the client's own value when it is printable ASCII (spaces included), 1..200 characters once trimmed; otherwise a generated one. Every error is \`{"error":{"code","message"}}\`, with \`details\` for invalid fields. What the HTTP layer refuses before any route sees it is \`invalid_request\` too, with its own status on any path: headers over 16 KiB 431, an \`Expect\` other than \`100-continue\` 417, a request not received whole within 30 s (REQUEST_TIMEOUT_MS) 408, malformed framing 400.

Chat widgets embedded in web pages use the widget gateway (\`/api/v1/widget/...\`) instead: a publishable widget key limited to its allowed origins, and a signed token per visitor. The health probes \`/healthz\` and \`/readyz\` need no key.`;

const errorContent = { "application/json": { schema: errorBodySchema } };

type HeaderObject = { $ref: string } | { description: string; schema: { type: "integer" | "string"; minimum?: number } };
const errorResponse = (description: string, headers?: Record<string, HeaderObject>) => ({ description, content: errorContent, ...(headers ? { headers } : {}) });

/** Which 429 lacks the organization's headers, for the descriptions of those headers on a 429. */
const NOT_ON_AUTH_FAILURES = "Absent from the 429 for failed authentications from one client address: such requests belong to no organization.";
const NOT_ON_WIDGET_AUTH_FAILURES = "Absent from the 429 for too many refused widget requests from one client address.";

/** Builds the document. Pure: call it once and keep the result. */
export function buildOpenApiDocument(opts: { version?: string } = {}): OpenApiDocument {
  const doc: ZodOpenApiObject = {
    openapi: "3.1.0",
    info: { title: "Agent Run Service API", version: opts.version ?? "1.0.0", description: DESCRIPTION },
    security: [{ bearerAuth: [] }],
    tags: [
      { name: "Runs", description: "Run an agent and follow its events." },
      { name: "Tasks", description: "Conversations and their runs." },
      { name: "Messages", description: "Message history of a task." },
      { name: "Memory", description: "Memory entries that persist across conversations." },
      { name: "Widget", description: "The widget gateway for chat widgets embedded in web pages, and the widget script." },
      { name: "Meta", description: "This document and the health probes." },
    ],
    paths: { ...openApiPaths(), ...publicOpenApiPaths() },
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "An API key of the organization (`ar_live_…`), created with the admin CLI (`key create`). Send it only over HTTPS." },
        widgetKey: { type: "apiKey", in: "header", name: "X-Widget-Key", description: "A publishable widget key (`pk_…`): safe to put in a web page, valid only from its allowed origins." },
      },
      parameters: {
        AgentId: {
          in: "header",
          name: "X-Agent-Id",
          required: true,
          description: "The agent, one of the key's organization. Sent once (a value with a comma, as a header sent twice arrives, is 400 invalid_request); any other value that names no agent, whatever its form, is 404 agent_not_found.",
          schema: { type: "string" },
        },
      },
      headers: {
        "X-Request-Id": {
          description: "The request's id: the client's X-Request-Id, trimmed, when it is 1..200 printable ASCII characters (0x20-0x7E, spaces included); otherwise a generated one.",
          schema: { type: "string", minLength: 1, maxLength: 200 },
        },
        "X-RateLimit-Limit": intHeader("Requests per minute of the organization's plan."),
        "X-RateLimit-Remaining": intHeader("Requests still allowed in the current sliding window."),
        "X-RateLimit-Reset": intHeader("Whole seconds until a request is allowed again; 0 when one is allowed now."),
        "Retry-After": { description: "Seconds to wait before retrying (at least 1).", schema: { type: "integer", minimum: 1 } },
        "X-Visitor-Token": { description: "The widget visitor's signed session token, renewed with every answer.", schema: { type: "string" } },
        "X-Heartbeat-Interval-Ms": intHeader("On an event stream: milliseconds between its `: ping` comments while idle (SSE_HEARTBEAT_MS, 14000 by default). A stream silent for several intervals is held open without data (a stuck proxy, a dead connection): re-attach with Last-Event-ID."),
      },
      responses: {
        BadRequest: errorResponse("invalid_request: malformed JSON, an invalid field or parameter (listed in `details`), or a missing X-Agent-Id."),
        Unauthorized: errorResponse("unauthorized: missing, malformed, unknown or revoked API key. After too many failures from one address, 429 instead.", {
          "WWW-Authenticate": {
            description: 'The Bearer challenge (RFC 6750): `Bearer realm="agentrun"` when no Authorization header was sent, with `error="invalid_request"` for a malformed or repeated one, `error="invalid_token"` for an unknown or revoked key.',
            schema: { type: "string" },
          },
        }),
        PaymentRequired: errorResponse("insufficient_credits: the organization's balance does not cover the agent's base price (1 credit unless its pricing says otherwise), or is not positive."),
        Forbidden: errorResponse("forbidden: the agent or resource belongs to another organization or agent; https_required: the request did not arrive over TLS."),
        NotFound: errorResponse(
          "agent_not_found, task_not_found, run_not_found, memory_not_found (for an id in the path that names nothing, whatever its form; an id in a body or query must match ^[A-Za-z0-9_-]{1,100}$, else 400 invalid_request), or not_found for an unknown route or method (under /api, once the key and X-Agent-Id are accepted).",
        ),
        Conflict: errorResponse("run_in_progress: the task already has a queued or running run, or the first request with this Idempotency-Key is still being accepted after about 5 s; idempotency_conflict: Idempotency-Key reused with another body."),
        PayloadTooLarge: errorResponse("payload_too_large: the body is over the limit (default 1 MiB)."),
        UnsupportedMediaType: errorResponse("unsupported_media_type: a body that is not application/json in UTF-8 (in one Content-Type header), or in a Content-Encoding other than gzip, deflate or br, or a Transfer-Encoding other than chunked."),
        TooManyRequests: errorResponse(
          "rate_limited: over the organization's requests per minute, with the organization's X-RateLimit-* headers and Retry-After; or, for a request whose key was missing or not accepted (401 otherwise), too many failed authentications from the client address (`AUTH_FAILURE_LIMIT` per minute), with Retry-After only.",
          {
            "X-RateLimit-Limit": intHeader(`Requests per minute of the organization's plan. ${NOT_ON_AUTH_FAILURES}`),
            "X-RateLimit-Remaining": intHeader(`0: no request is allowed in the organization's current sliding window. ${NOT_ON_AUTH_FAILURES}`),
            "X-RateLimit-Reset": intHeader(`Whole seconds until the organization may send a request again (equal to Retry-After). ${NOT_ON_AUTH_FAILURES}`),
            "Retry-After": { $ref: "#/components/headers/Retry-After" },
          },
        ),
        HttpsRequired: errorResponse("https_required: `REQUIRE_HTTPS` is on and the request did not arrive over TLS."),
        InternalError: errorResponse("internal_error: unexpected error, logged with the request id."),
        Unavailable: errorResponse("unavailable: the database or Redis is down; retry later."),
        WidgetUnauthorized: errorResponse("unauthorized: missing, unknown or revoked widget key, or an invalid, expired or missing (where required) visitor token."),
        WidgetForbidden: errorResponse("forbidden: the Origin is not among the widget key's allowed origins, or the task belongs to another visitor; https_required: the request did not arrive over TLS."),
        WidgetTooManyRequests: errorResponse("rate_limited: over the widget key's or the client address's requests per minute (`WIDGET_RPM_PER_KEY`, `WIDGET_RPM_PER_IP`), with the X-RateLimit-* headers of the limit that refused it and Retry-After; or too many refused widget requests from the address (`AUTH_FAILURE_LIMIT`), with Retry-After only. Widget requests do not count against the organization's plan limit.", {
          "X-RateLimit-Limit": intHeader(`Requests per minute of the limit that refused the request (per key or per address). ${NOT_ON_WIDGET_AUTH_FAILURES}`),
          "X-RateLimit-Remaining": intHeader(`0: no request is allowed in that limit's current sliding window. ${NOT_ON_WIDGET_AUTH_FAILURES}`),
          "X-RateLimit-Reset": intHeader(`Whole seconds until that limit allows a request again (equal to Retry-After). ${NOT_ON_WIDGET_AUTH_FAILURES}`),
          "Retry-After": { $ref: "#/components/headers/Retry-After" },
        }),
      },
      schemas: {
        Error: errorBodySchema,
        RunRequest: runRequestSchema,
        RunEvent: runEventSchema,
        Run: runViewSchema,
        RunResult: runResultSchema,
        Task: taskViewSchema,
        TaskDetail: taskDetailSchema,
        Message: messageViewSchema,
        MemoryEntry: memoryEntrySchema,
        MemoryCreate: memoryCreateSchema,
      },
    },
  };
  return createDocument(doc, { override: integerParams });
}

/**
 * Query parameters arrive as strings, so `intParam` validates a string of digits and pipes it
 * into a bounded integer; the document shows what a caller should send: the integer, its bounds,
 * and the default that `intParam` applies (kept in its metadata: the input side of a transform
 * shows none of the outer schema's own).
 */
const integerParams: NonNullable<CreateDocumentOptions["override"]> = ({ zodSchema, jsonSchema, io }) => {
  const fallback = io === "input" ? (zodSchema as unknown as z.ZodType).meta()?.default : undefined;
  if (fallback !== undefined) jsonSchema.default = fallback;
  const def = (zodSchema as unknown as z.ZodType)._zod.def;
  if (io !== "input" || def.type !== "pipe" || jsonSchema.type !== "string") return;
  const out = (def as z.core.$ZodPipeDef).out;
  if (out._zod.def.type !== "number") return;
  const { type, minimum, maximum } = z.toJSONSchema(out) as { type: "integer" | "number"; minimum?: number; maximum?: number };
  delete jsonSchema.pattern;
  // zod's safe-integer bound is not the parameter's: `offsetParam` takes any integer (clamped).
  Object.assign(jsonSchema, { type, minimum, ...(maximum !== undefined && maximum < Number.MAX_SAFE_INTEGER && { maximum }) });
};
