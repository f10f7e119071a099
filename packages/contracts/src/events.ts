/**
 * Run events: what the worker publishes, what is stored per run, and what the gateway streams.
 * Every event carries its `seq`, which starts at 1 in each run and increases by 1.
 */
import { z } from "zod";

const base = { seq: z.number().int().positive() };

export const runStartedEvent = z.object({ ...base, type: z.literal("run_started"), run_id: z.string(), task_id: z.string() });
export const textChunkEvent = z.object({ ...base, type: z.literal("text_chunk"), content: z.string() });
export const toolCallEvent = z.object({
  ...base,
  type: z.literal("tool_call"),
  tool: z.string(),
  action: z.string(),
  params: z.record(z.string(), z.unknown()).optional(),
  call_id: z.string().optional(),
});
export const toolResultEvent = z.object({
  ...base,
  type: z.literal("tool_result"),
  tool: z.string(),
  action: z.string().optional(),
  result: z.unknown(),
  call_id: z.string().optional(),
});
export const runErrorSchema = z.object({ code: z.string(), message: z.string() });
/** Why a model ended its answer early: at its token limit, or by its content filter. */
export const CUT_FINISH_REASONS = ["length", "content_filter"] as const;
export type CutFinishReason = (typeof CUT_FINISH_REASONS)[number];
export const isCutFinishReason = (r: unknown): r is CutFinishReason => (CUT_FINISH_REASONS as readonly unknown[]).includes(r);
export const runCompletedEvent = z.object({
  ...base,
  type: z.literal("run_completed"),
  run_id: z.string(),
  credits_used: z.number().int(),
  duration_ms: z.number().int().optional(),
  /** Present when the model ended the answer early (the run still completed, with what it said). */
  finish_reason: z.enum(CUT_FINISH_REASONS).optional(),
});
export const runFailedEvent = z.object({ ...base, type: z.literal("run_failed"), run_id: z.string(), error: runErrorSchema });
export const runCancelledEvent = z.object({ ...base, type: z.literal("run_cancelled"), run_id: z.string() });

export const runEventSchema = z.discriminatedUnion("type", [
  runStartedEvent,
  textChunkEvent,
  toolCallEvent,
  toolResultEvent,
  runCompletedEvent,
  runFailedEvent,
  runCancelledEvent,
]);

export type RunEvent = z.infer<typeof runEventSchema>;
export type RunEventType = RunEvent["type"];
/** An event before the publisher assigns its seq. */
export type RunEventInput = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, "seq"> : never) : never;
export type TerminalEvent = Extract<RunEvent, { type: "run_completed" | "run_failed" | "run_cancelled" }>;

export const TERMINAL_EVENT_TYPES: ReadonlySet<RunEventType> = new Set(["run_completed", "run_failed", "run_cancelled"]);

export function isTerminalEvent(e: { type: string }): boolean {
  return TERMINAL_EVENT_TYPES.has(e.type as RunEventType);
}

const FINAL_STATUS_OF: Readonly<Record<TerminalEvent["type"], "completed" | "failed" | "cancelled">> = {
  run_completed: "completed",
  run_failed: "failed",
  run_cancelled: "cancelled",
};

/** The status a run ends in, by its terminal event; undefined for any other event. */
export function finalStatusOf(e: { type: string }): "completed" | "failed" | "cancelled" | undefined {
  return isTerminalEvent(e) ? FINAL_STATUS_OF[e.type as TerminalEvent["type"]] : undefined;
}

/** Error codes a run can end with (stored on the run and sent in `run_failed`). */
export const RUN_ERROR_CODES = [
  "model_error",
  "model_timeout",
  "model_rate_limited",
  "model_bad_response",
  "max_steps_exceeded",
  "run_timeout",
  "worker_lost",
  "worker_shutdown",
  "unavailable",
  "internal_error",
] as const;
export type RunErrorCode = (typeof RUN_ERROR_CODES)[number];
