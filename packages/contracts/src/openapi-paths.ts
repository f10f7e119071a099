/** The operations of the OpenAPI document (see openapi.ts), one entry per public endpoint. */
import { z } from "zod";
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject, ZodOpenApiResponsesObject } from "zod-openapi";
import { runEventSchema } from "./events";
import { memoryCreateSchema, memoryEntrySchema, memoryListQuerySchema, memoryListSchema } from "./memory";
import { runRequestSchema } from "./runs";
import { eventsQuerySchema, idempotencyKeySchema, lastEventIdSchema, messageListQuerySchema, runListQuerySchema, taskCreateSchema, taskListQuerySchema } from "./tasks";
import {
  AFTER_THE_END,
  memoryPathSchema,
  messageListSchema,
  runAcceptedSchema,
  runListSchema,
  runPathSchema,
  runResultSchema,
  runViewSchema,
  taskDetailSchema,
  taskListSchema,
  taskPathSchema,
  taskViewSchema,
} from "./openapi-schemas";

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });

/** Headers of every response to a request with a valid API key. */
export const rateLimitHeaders = {
  "X-RateLimit-Limit": ref("headers", "X-RateLimit-Limit"),
  "X-RateLimit-Remaining": ref("headers", "X-RateLimit-Remaining"),
  "X-RateLimit-Reset": ref("headers", "X-RateLimit-Reset"),
};
const okHeaders = { ...rateLimitHeaders, "X-Request-Id": ref("headers", "X-Request-Id") };
/** An answer that may be an event stream. */
const streamHeaders = { ...okHeaders, "X-Heartbeat-Interval-Ms": ref("headers", "X-Heartbeat-Interval-Ms") };

const json = (schema: z.ZodType, description: string) => ({ description, headers: okHeaders, content: { "application/json": { schema } } });
const noContent = (description: string) => ({ description, headers: okHeaders });
const eventStream = { schema: runEventSchema };
const STREAM_FRAMING =
  "Each event is framed `id: <seq>` + `data: <RunEvent as JSON>` + a blank line; seq starts at 1 in each run and increases by 1. A `: ping` comment comes while idle, every X-Heartbeat-Interval-Ms (14 s by default). A run ends with exactly one terminal event (run_completed, run_failed or run_cancelled), after which the stream ends. A stream can also end before it (the gateway shutting down, the API key revoked, a client that stopped reading): re-attach with the events endpoint and `Last-Event-ID` to receive the rest.";

/** Every request that sends a body, whatever the method: it must be JSON (415) within the limit (413). */
const BODY_ERRORS: ZodOpenApiResponsesObject = { "413": ref("responses", "PayloadTooLarge"), "415": ref("responses", "UnsupportedMediaType") };

/**
 * Errors every authenticated operation can answer, in the contract's order of checks; a body is
 * checked whatever the method (a GET with a body that is not JSON is 415).
 */
const COMMON_ERRORS: ZodOpenApiResponsesObject = {
  "400": ref("responses", "BadRequest"),
  "401": ref("responses", "Unauthorized"),
  "403": ref("responses", "Forbidden"),
  "404": ref("responses", "NotFound"),
  "429": ref("responses", "TooManyRequests"),
  "500": ref("responses", "InternalError"),
  "503": ref("responses", "Unavailable"),
  ...BODY_ERRORS,
};

/** An operation that needs the API key and X-Agent-Id. */
function authed(tag: string, op: Omit<ZodOpenApiOperationObject, "tags">, extraErrors: ZodOpenApiResponsesObject = {}): ZodOpenApiOperationObject {
  return {
    ...op,
    tags: [tag],
    parameters: [ref("parameters", "AgentId"), ...(op.parameters ?? [])],
    responses: { ...op.responses, ...COMMON_ERRORS, ...extraErrors },
  };
}

export function openApiPaths(): ZodOpenApiPathsObject {
  return {
    "/api/run": {
      post: authed(
        "Runs",
        {
          operationId: "createRun",
          summary: "Run the agent on a query",
          description:
            "Starts a run on a new task, or continues `task_id`. Reserves the agent's base price (1 credit unless its pricing says otherwise; 1 credit for an agent priced at base 0 that charges for tool calls or tokens, refunded when the run costs nothing); the run costs `1 + tool calls + ceil(total tokens / 1000)` credits unless the agent's pricing says otherwise (a tool call is charged when its tool ran, not when it was refused before running or failed by the service's own outage). A client that disconnects does not stop the run. A key revoked while its request waits for the run (`stream: false`) gets 401 with `details: {run_id, task_id}`: the run goes on.",
          requestParams: {
            header: z.object({
              "Idempotency-Key": idempotencyKeySchema.optional().meta({ description: "The same key with the same body within 24 h returns the same run instead of starting another." }),
            }),
          },
          requestBody: { required: true, content: { "application/json": { schema: runRequestSchema } } },
          responses: {
            "200": {
              description: `\`stream: true\` (default): text/event-stream of RunEvent. ${STREAM_FRAMING} \`stream: false\`: the finished run with its tool calls (a failed run is still 200, with \`status: failed\` and \`error\`). The body's \`stream\` decides which, not the Accept header.`,
              headers: streamHeaders,
              content: { "text/event-stream": eventStream, "application/json": { schema: runResultSchema } },
            },
            "202": json(runAcceptedSchema, "`stream: false` and the run outlasted the wait limit (default 120 s), or the gateway instance shut down: it goes on; follow it with the events endpoint. Also for a run accepted that could neither be queued nor failed (status `queued`): the workers queue it later."),
          },
        },
        { "402": ref("responses", "PaymentRequired"), "409": ref("responses", "Conflict"), ...BODY_ERRORS },
      ),
    },
    "/api/tasks": {
      get: authed("Tasks", {
        operationId: "listTasks",
        summary: "List the agent's tasks, newest first",
        requestParams: { query: taskListQuerySchema },
        responses: { "200": json(taskListSchema, "A page of tasks.") },
      }),
      post: authed(
        "Tasks",
        {
          operationId: "createTask",
          summary: "Create an empty task",
          description: "Without `title`, the task is titled with the query of its first run, cut to 80 characters (empty until then), as a task started by `POST /api/run` is. An `Idempotency-Key` header is refused (400 naming it): only `POST /api/run` takes one.",
          requestBody: { content: { "application/json": { schema: taskCreateSchema } } },
          responses: { "201": json(taskViewSchema, "The new task, status pending.") },
        },
        BODY_ERRORS,
      ),
    },
    "/api/tasks/{task_id}": {
      get: authed("Tasks", {
        operationId: "getTask",
        summary: "Get a task with its run summaries",
        requestParams: { path: taskPathSchema },
        responses: { "200": json(taskDetailSchema, "The task.") },
      }),
      delete: authed("Tasks", {
        operationId: "deleteTask",
        summary: "Delete a task with its runs, messages and events",
        description: "Cancels a run in progress first (and runs started while it is deleted). Afterwards every read of the task is 404. 409 `run_in_progress` when runs kept starting on the task through three rounds of cancelling.",
        requestParams: { path: taskPathSchema },
        responses: { "204": noContent("Deleted.") },
      }, { "409": ref("responses", "Conflict"), ...BODY_ERRORS }),
    },
    "/api/tasks/{task_id}/runs": {
      get: authed("Tasks", {
        operationId: "listRuns",
        summary: "List a task's runs, oldest first",
        description: "Every run of the task by default, as far as 8 MB of their queries and outputs, each run counted 512 bytes more for its other fields (at least one run, at most 16,384); `has_more` says whether runs were left out, `after` pages on. 400 when `after` names no run of this task.",
        requestParams: { path: taskPathSchema, query: runListQuerySchema },
        responses: { "200": json(runListSchema, "The runs.") },
      }),
    },
    "/api/tasks/{task_id}/runs/{run_id}": {
      get: authed("Runs", {
        operationId: "getRun",
        summary: "One run of a task",
        description: "The run as it is now: what to poll after a `stream: false` request answered 202.",
        requestParams: { path: runPathSchema },
        responses: { "200": json(runViewSchema, "The run.") },
      }),
    },
    "/api/tasks/{task_id}/runs/{run_id}/events": {
      get: authed("Runs", {
        operationId: "getRunEvents",
        summary: "Replay (and follow) a run's events",
        description:
          "As an event stream (the default): sends what is stored, then follows a run in progress live until its terminal event. Nothing is sent twice and nothing is skipped. With `Accept: application/json`: the events stored after the cursor, at once (for a run in progress, without its terminal event yet).",
        requestParams: {
          path: runPathSchema,
          query: eventsQuerySchema,
          header: z.object({ "Last-Event-ID": lastEventIdSchema.optional().meta({ description: "Resume after this seq (as `after`)." }) }),
        },
        responses: {
          "200": {
            description: `text/event-stream of RunEvent by default. ${STREAM_FRAMING} With \`Accept: application/json\`: \`{events}\`.`,
            headers: streamHeaders,
            content: { "text/event-stream": eventStream, "application/json": { schema: z.object({ events: z.array(runEventSchema) }) } },
          },
          "204": noContent(`${AFTER_THE_END} Only in the live framing: with \`Accept: application/json\` the answer is 200 \`{"events": []}\`.`),
        },
      }),
    },
    "/api/tasks/{task_id}/runs/{run_id}/cancel": {
      post: authed("Runs", {
        operationId: "cancelRun",
        summary: "Cancel a queued or running run",
        requestParams: { path: runPathSchema },
        responses: {
          "202": json(runViewSchema, "The run as it is now. A queued run is cancelled at once, a running one within moments; either ends with run_cancelled. A run that has already ended is answered unchanged."),
        },
      }, BODY_ERRORS),
    },
    "/api/messages": {
      get: authed("Messages", {
        operationId: "listMessages",
        summary: "A task's message history, oldest first",
        description:
          "The newest `limit` messages (before `before`), oldest first. A page of large messages holds fewer: it ends once the messages after its oldest one pass 8 MB (at least one message), with `has_more: true`; only `has_more: false` means the history has been read to its start.",
        requestParams: { query: messageListQuerySchema },
        responses: { "200": json(messageListSchema, "A page of messages.") },
      }),
    },
    "/api/memory": {
      get: authed("Memory", {
        operationId: "listMemory",
        summary: "List the agent's memory entries, newest first",
        description: "All users of the agent when user_id is absent. `before=<memory_id>` pages back from that entry, also once it is deleted (400 when it names an entry outside the listed scope, or is not a memory id).",
        requestParams: { query: memoryListQuerySchema },
        responses: { "200": json(memoryListSchema, "The entries.") },
      }),
      post: authed(
        "Memory",
        {
          operationId: "createMemory",
          summary: "Add a memory entry",
          description:
            "A user's entries are deduplicated on their trimmed content: when the user already has an entry with this content, no second one is stored, and that entry (same `memory_id` and `created_at`) is answered. It takes the request's category when the request names one (the latest write wins) and keeps its stored category when the request names none. Retrying a create is therefore safe.",
          requestBody: { required: true, content: { "application/json": { schema: memoryCreateSchema } } },
          responses: {
            "201": json(memoryEntrySchema, "The entry: a new one, or the user's existing entry with this content, with the request's category if it names one."),
          },
        },
        BODY_ERRORS,
      ),
    },
    "/api/memory/{memory_id}": {
      delete: authed("Memory", {
        operationId: "deleteMemory",
        summary: "Delete a memory entry",
        requestParams: { path: memoryPathSchema },
        responses: { "204": noContent("Deleted.") },
      }, BODY_ERRORS),
    },
    "/api/openapi.json": {
      get: {
        operationId: "getOpenApi",
        tags: ["Meta"],
        summary: "This OpenAPI document",
        description: "Needs no API key.",
        security: [],
        responses: {
          "200": { description: "The OpenAPI 3.1 document.", content: { "application/json": { schema: { type: "object" } } } },
          "403": ref("responses", "HttpsRequired"),
        },
      },
    },
  };
}
