/**
 * Memory: the public API's bodies and the internal API between the gateway/worker and the
 * memory service.
 */
import { z } from "zod";
import { MEMORY_CATEGORIES, NOT_BLANK_PATTERN, idParam, intParam } from "./common";

export const MEMORY_CONTENT_MAX_CHARS = 4000;

export const memoryCategorySchema = z.enum(MEMORY_CATEGORIES);
export const memoryUserIdSchema = z.string().min(1).max(256);

/** A memory's content, trimmed: what the API, the memory service and the memory tool accept. */
export const memoryContentSchema = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(MEMORY_CONTENT_MAX_CHARS)
  .meta({ pattern: NOT_BLANK_PATTERN, description: `Stored trimmed: 1..${MEMORY_CONTENT_MAX_CHARS} characters once leading and trailing whitespace is removed.` });

/** Body of `POST /api/memory`. */
export const memoryCreateSchema = z
  .object({
    content: memoryContentSchema,
    category: memoryCategorySchema.optional().meta({ description: "`general` for a new entry when absent; an exact duplicate keeps its category unless one is given." }),
    user_id: memoryUserIdSchema,
  })
  .strict();

/** Query of `GET /api/memory`: newest first; `before=<memory_id>` pages back from that entry. */
export const memoryListQuerySchema = z.strictObject({
  user_id: memoryUserIdSchema.optional(),
  limit: intParam(1, 100, 20),
  before: idParam.optional(),
});

/** A memory entry as the API returns it. */
export const memoryEntrySchema = z.object({
  memory_id: z.string(),
  content: z.string(),
  category: memoryCategorySchema,
  user_id: z.string(),
  created_at: z.string().meta({ format: "date-time" }),
});
export type MemoryEntryView = z.infer<typeof memoryEntrySchema>;

/** A page of memory entries, as `GET /api/memory` and the memory service's list answer it. */
export const memoryListSchema = z.object({
  memories: z.array(memoryEntrySchema).meta({ description: "Newest first." }),
  has_more: z.boolean().meta({ description: "Older entries follow: ask again with `before` set to the last entry's memory_id." }),
});

/** The scope every internal memory call names. */
export const memoryScopeSchema = z.object({ org_id: z.string().min(1), agent_id: z.string().min(1) });
export type MemoryScope = z.infer<typeof memoryScopeSchema>;

export const internalMemoryCreateSchema = memoryScopeSchema.extend({
  user_id: memoryUserIdSchema,
  content: memoryContentSchema,
  category: memoryCategorySchema.optional(),
});

export const internalMemorySearchSchema = memoryScopeSchema.extend({
  user_id: memoryUserIdSchema,
  query: z.string().max(32_000),
  limit: z.number().int().min(1).max(100).default(10),
});

/** The memories to put in a run's prompt: the most relevant to the query first, then the newest. */
export const internalMemoryContextSchema = memoryScopeSchema.extend({
  user_id: memoryUserIdSchema,
  query: z.string().max(32_000),
  max_count: z.number().int().min(1).max(100).default(20),
  max_chars: z.number().int().min(1).max(100_000).default(4000),
});
