/**
 * Memory entry ids: `mem_` and a UUIDv7 without dashes (see `newId`). A UUIDv7 begins with its
 * creation time in Unix milliseconds, and an entry stores that time as its `created_at`, so an
 * id alone places an entry in the list order (created_at desc, id desc), even once it is deleted.
 */
import { newId } from "@agentrun/db";

/** `mem_`, then 32 lower-case hex digits with the UUID version 7 and the RFC 9562 variant. */
const MEMORY_ID = /^mem_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/;

/** The creation time `id` carries, or undefined when `id` is not a memory id. */
export function memoryIdTime(id: string): Date | undefined {
  if (!MEMORY_ID.test(id)) return undefined;
  return new Date(Number.parseInt(id.slice(4, 16), 16));
}

/** A new entry's id and its `created_at`: the time the id carries. */
export function newMemoryId(): { id: string; createdAt: Date } {
  const id = newId("mem");
  const createdAt = memoryIdTime(id);
  if (!createdAt) throw new Error(`newId("mem") made an id that is not a memory id: ${id}`);
  return { id, createdAt };
}
