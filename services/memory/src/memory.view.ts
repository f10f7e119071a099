import type { MemoryCategoryValue, MemoryEntryView } from "@agentrun/contracts";

/** The columns a memory entry needs to be shown, from Prisma or from a raw query. */
export interface MemoryRow {
  id: string;
  userId: string;
  content: string;
  category: MemoryCategoryValue;
  createdAt: Date;
}

/** The public shape of an entry (`created_at` in ISO 8601 UTC with `Z`). */
export function toMemoryView(row: MemoryRow): MemoryEntryView {
  return {
    memory_id: row.id,
    content: row.content,
    category: row.category,
    user_id: row.userId,
    created_at: row.createdAt.toISOString(),
  };
}
