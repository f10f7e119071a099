import { z } from "zod";

/** An optional integer query parameter within bounds; non-integers and out-of-range values fail. */
export const optionalIntParam = (min: number, max: number) =>
  z
    .string()
    .regex(/^-?\d+$/, "must be an integer")
    .transform(Number)
    // Bounds first, and a failed one stops there: past 2^53, int() would add a second "too big".
    .pipe(z.number().min(min, { abort: true }).max(max, { abort: true }).int())
    .optional();

/** {@link optionalIntParam}, `def` when absent (also in its metadata, for the API description). */
export const intParam = (min: number, max: number, def: number) =>
  optionalIntParam(min, max)
    .transform((v) => v ?? def)
    .meta({ default: def });

/**
 * A list's `offset`: any integer from 0, however large. One past every row reads as `clampAt`
 * (past every row too): the page is empty all the same, and the query gets a number it takes.
 */
export const offsetParam = (clampAt: number) =>
  z
    .string()
    .regex(/^-?\d+$/, "must be an integer")
    // Clamped before the number check, which refuses Infinity (over 308 digits).
    .transform((text) => Math.min(Number(text), clampAt))
    .pipe(z.number().int().min(0))
    .optional()
    .transform((v) => v ?? 0)
    .meta({ default: 0 });

export const TASK_STATUSES = ["pending", "running", "completed", "failed"] as const;
export const RUN_STATUSES = ["queued", "running", "completed", "failed", "cancelled"] as const;
export const MEMORY_CATEGORIES = ["general", "preference", "fact", "instruction"] as const;

export type TaskStatusValue = (typeof TASK_STATUSES)[number];
export type RunStatusValue = (typeof RUN_STATUSES)[number];
export type MemoryCategoryValue = (typeof MEMORY_CATEGORIES)[number];

/** An opaque resource id as it may appear in a path. */
/**
 * JSON Schema pattern of a string stored trimmed that must not be empty: it holds a character
 * that is not whitespace (what String.prototype.trim removes). Documentation only: the zod
 * schema trims, then checks the length.
 */
export const NOT_BLANK_PATTERN = "\\S";

export const idParam = z.string().min(1).max(100).regex(/^[A-Za-z0-9_-]+$/, "is not a valid id");
