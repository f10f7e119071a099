/**
 * Response schemas that the OpenAPI document needs and the contract modules declare only as
 * TypeScript interfaces (RunView, TaskView, MessageView), here as zod so that the document is
 * generated from zod end to end. Request schemas come from the contract modules themselves.
 */
import { z } from "zod";
import { RUN_STATUSES, TASK_STATUSES } from "./common";
import { CUT_FINISH_REASONS, runErrorSchema } from "./events";

/** An OpenAPI header object for a non-negative integer header. */
export const intHeader = (description: string) => ({ description, schema: { type: "integer" as const, minimum: 0 } });

const timestamp = z.string().meta({ format: "date-time", description: "ISO 8601 UTC timestamp.", examples: ["2025-01-31T12:00:00.000Z"] });
const nullableTimestamp = timestamp.nullable();

/** The error body of every failure, 404 of unknown routes and 500 included. */
export const errorBodySchema = z.object({
  error: z.object({
    code: z.string().meta({
      description: "Machine-readable code, e.g. invalid_request, unauthorized, insufficient_credits, forbidden, https_required, agent_not_found, task_not_found, run_not_found, memory_not_found, not_found, run_in_progress, idempotency_conflict, payload_too_large, unsupported_media_type, rate_limited, internal_error, unavailable.",
    }),
    message: z.string().meta({ description: "Human-readable explanation; never a stack trace." }),
    details: z.unknown().optional().meta({ description: "Extra detail, e.g. the invalid fields as `[{path, message}]`." }),
  }),
});

export const runViewSchema = z.object({
  run_id: z.string(),
  task_id: z.string(),
  status: z.enum(RUN_STATUSES),
  query: z.string(),
  output: z.string().meta({ description: "The agent's final text: what the model said in its last call (text said before calling tools is a message of its own)." }),
  credits_used: z.number().int(),
  duration_ms: z.number().int().nullable(),
  created_at: timestamp,
  started_at: nullableTimestamp,
  completed_at: nullableTimestamp,
  error: runErrorSchema.optional().meta({ description: "Present when the run failed." }),
  finish_reason: z
    .enum(CUT_FINISH_REASONS)
    .optional()
    .meta({ description: "Present when the run completed with an answer the model ended early: `length` (its token limit) or `content_filter`; `output` is what it said." }),
});

export const toolCallViewSchema = z.object({
  tool: z.string(),
  action: z.string(),
  params: z.record(z.string(), z.unknown()),
  result: z.unknown(),
});

/** The answer of `POST /api/run` with `stream: false` once the run has ended. */
export const runResultSchema = runViewSchema.extend({ tool_calls: z.array(toolCallViewSchema) });

/** The answer of `POST /api/run` with `stream: false` when the run outlasts the wait limit. */
export const runAcceptedSchema = z.object({ run_id: z.string(), task_id: z.string(), status: z.enum(RUN_STATUSES) });

export const taskViewSchema = z.object({
  task_id: z.string(),
  title: z.string(),
  status: z.enum(TASK_STATUSES),
  created_at: timestamp,
  updated_at: timestamp,
  run_count: z.number().int(),
  credits_used: z.number().int(),
  user_id: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

export const runSummarySchema = runViewSchema.pick({ run_id: true, status: true, query: true, credits_used: true, duration_ms: true, created_at: true });
export const taskDetailSchema = taskViewSchema.extend({ runs: z.array(runSummarySchema).meta({ description: "Oldest first, as far as 8 MB of their queries, each run counted 512 bytes more for its other fields (at least one run, at most 16,384): fewer than `run_count` then; `GET /api/tasks/{task_id}/runs` pages through them all." }) });
export const taskListSchema = z.object({ tasks: z.array(taskViewSchema), total: z.number().int().meta({ description: "Tasks matching the filter, over all pages." }) });
export const runListSchema = z.object({
  runs: z.array(runViewSchema).meta({ description: "Oldest first." }),
  has_more: z.boolean().meta({ description: "True when runs after the last one were left out (by `limit`, or past 8 MB of queries and outputs or 16,384 runs): ask again with `after` set to the last run's id." }),
});

export const messageViewSchema = z.object({
  message_id: z.string(),
  task_id: z.string(),
  run_id: z.string().nullable(),
  role: z.enum(["user", "assistant", "tool"]),
  content: z.string(),
  created_at: timestamp,
  tool: z.string().optional(),
  action: z.string().optional(),
  params: z.record(z.string(), z.unknown()).optional(),
  result: z.unknown().optional(),
});

export const messageListSchema = z.object({ messages: z.array(messageViewSchema).meta({ description: "Oldest first." }), has_more: z.boolean() });

/** An id in a path: one that names nothing, whatever its form, is answered 404 (not 400). */
const pathId = (description: string) => z.string().meta({ description });
const taskId = pathId("The task's id. An id that names no task, whatever its form, is 404 task_not_found; a task of another organization or of another agent is 403 forbidden.");
export const taskPathSchema = z.object({ task_id: taskId });
export const runPathSchema = z.object({ task_id: taskId, run_id: pathId("The run's id. An id that names no run of this task, whatever its form, is 404 run_not_found.") });
export const memoryPathSchema = z.object({
  memory_id: pathId("The memory entry's id. An id that names no entry, whatever its form, is 404 memory_not_found; an entry of another organization or of another agent is 403 forbidden."),
});

/** The answer to a stream resumed after its run's terminal event. */
export const AFTER_THE_END = "The run has ended and its terminal event is at the given seq (a stream resumed after it): no body. EventSource stops reconnecting on a 204. (A seq past the terminal event gets a stream of the terminal event alone.)";
