/** Tasks, messages and run events: query and body schemas of the conversation endpoints. */
import { z } from "zod";
import { NOT_BLANK_PATTERN, TASK_STATUSES, idParam, intParam, offsetParam, optionalIntParam } from "./common";
import { runContextSchema } from "./runs";

/** Query of `GET /api/tasks`. */
export const taskListQuerySchema = z.strictObject({
  limit: intParam(1, 100, 20),
  // (No table holds a billion tasks of one agent: an offset past that is past every row.)
  offset: offsetParam(1_000_000_000),
  status: z.enum(TASK_STATUSES).optional(),
});

/** Body of `POST /api/tasks`. */
export const taskCreateSchema = z
  .object({
    title: z.string().trim().min(1).max(200).optional().meta({ pattern: NOT_BLANK_PATTERN, description: "Stored trimmed: 1..200 characters once leading and trailing whitespace is removed." }),
    user_id: z.string().min(1).max(256).optional(),
    metadata: runContextSchema.shape.metadata,
  })
  .strict();

/** Query of `GET /api/messages`. */
export const messageListQuerySchema = z.strictObject({
  task_id: idParam,
  limit: intParam(1, 200, 50),
  before: idParam.optional(),
});

/** Query of `GET /api/tasks/{id}/runs`: every run by default; `limit` and `after` page through them. */
export const runListQuerySchema = z.strictObject({
  limit: optionalIntParam(1, 1000).meta({ description: "Most runs in the page (1 to 1000); without it, every run, up to 8 MB of queries and outputs (512 bytes more counted per run) and at most 16,384 runs." }),
  after: idParam.optional().meta({ description: "A run of this task: the page starts with the run after it (oldest first)." }),
});

/** The largest seq a client may name (seqs are stored as 32-bit integers). */
export const MAX_EVENT_SEQ = 1_000_000_000;

/** Query of `GET /api/tasks/{id}/runs/{run_id}/events`. */
export const eventsQuerySchema = z.strictObject({
  after: intParam(0, MAX_EVENT_SEQ, 0),
});

/** `Last-Event-ID`: the seq of the last event the client has. */
export const lastEventIdSchema = z.string().regex(/^\d{1,10}$/, "must be a non-negative integer").transform(Number).pipe(z.number().int().min(0).max(MAX_EVENT_SEQ));

/** `Idempotency-Key` header. */
export const idempotencyKeySchema = z.string().min(1).max(255).regex(/^[\x21-\x7e]+$/, "must be 1-255 printable ASCII characters without spaces");

export interface TaskView {
  task_id: string;
  title: string;
  status: string;
  created_at: string;
  updated_at: string;
  run_count: number;
  credits_used: number;
  user_id?: string;
  metadata?: Record<string, unknown>;
}

export interface MessageView {
  message_id: string;
  task_id: string;
  run_id: string | null;
  role: "user" | "assistant" | "tool";
  content: string;
  created_at: string;
  tool?: string;
  action?: string;
  params?: unknown;
  result?: unknown;
}
