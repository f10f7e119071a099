import { z } from "zod";

/** An integer query parameter within bounds; non-integers and out-of-range values fail. */
export const intParam = (min: number, max: number, def: number) =>
  z
    .string()
    .regex(/^-?\d+$/, "must be an integer")
    .transform(Number)
    // Bounds first, and a failed one stops there: past 2^53, int() would add a second "too big".
    .pipe(z.number().min(min, { abort: true }).max(max, { abort: true }).int())
    .optional()
    .transform((v) => v ?? def);

export const TASK_STATUSES = ["pending", "running", "completed", "failed"] as const;
export const RUN_STATUSES = ["queued", "running", "completed", "failed", "cancelled"] as const;
export const MEMORY_CATEGORIES = ["general", "preference", "fact", "instruction"] as const;

export type TaskStatusValue = (typeof TASK_STATUSES)[number];
export type RunStatusValue = (typeof RUN_STATUSES)[number];
export type MemoryCategoryValue = (typeof MEMORY_CATEGORIES)[number];

/** An opaque resource id as it may appear in a path. */
export const idParam = z.string().min(1).max(100).regex(/^[A-Za-z0-9_-]+$/, "is not a valid id");
