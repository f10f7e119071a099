import type { MemoryEntryView } from "@agentrun/contracts";

/**
 * The public memory entry: exactly the contract's five fields, so nothing else the memory
 * service's internal API returns (such as a search `score`) reaches a caller.
 */
export function toMemoryEntryView(entry: MemoryEntryView): MemoryEntryView {
  return {
    memory_id: entry.memory_id,
    content: entry.content,
    category: entry.category,
    user_id: entry.user_id,
    created_at: entry.created_at,
  };
}
