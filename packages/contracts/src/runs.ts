import { z } from "zod";
import { idParam } from "./common";
import type { CutFinishReason } from "./events";

export const QUERY_MAX_CHARS = 32_000;
export const METADATA_MAX_KEYS = 50;
export const METADATA_MAX_BYTES = 16 * 1024;

export const runContextSchema = z
  .object({
    user_id: z.string().min(1).max(256).optional(),
    user_name: z.string().max(256).optional(),
    metadata: z
      .record(z.string(), z.unknown())
      .refine((m) => Object.keys(m).length <= METADATA_MAX_KEYS, `must have at most ${METADATA_MAX_KEYS} keys`)
      .refine((m) => Buffer.byteLength(JSON.stringify(m)) <= METADATA_MAX_BYTES, `must be at most ${METADATA_MAX_BYTES} bytes as JSON`)
      .optional()
      .meta({
        maxProperties: METADATA_MAX_KEYS,
        description: `At most ${METADATA_MAX_KEYS} keys and ${METADATA_MAX_BYTES} bytes as JSON, nested so that the whole request body nests at most 32 levels (the levels around it count), without the key \`__proto__\` at any depth; integers within ±9007199254740991 (larger ones as strings).`,
      }),
  })
  .strict();

export type RunContext = z.infer<typeof runContextSchema>;

/** Body of `POST /api/run`. */
export const runRequestSchema = z
  .object({
    query: z.string().min(1, "must not be empty").max(QUERY_MAX_CHARS),
    task_id: idParam.optional(),
    stream: z.boolean().default(true),
    context: runContextSchema.optional(),
  })
  .strict();

export type RunRequest = z.infer<typeof runRequestSchema>;

/** A run as the API returns it. */
export interface RunView {
  run_id: string;
  task_id: string;
  status: string;
  query: string;
  output: string;
  credits_used: number;
  duration_ms: number | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  error?: { code: string; message: string };
  /** Present when the model ended the run's answer early: `length` (its token limit) or `content_filter`. */
  finish_reason?: CutFinishReason;
}

export interface ToolCallView {
  tool: string;
  action: string;
  params: Record<string, unknown>;
  result: unknown;
}
