/**
 * The memory store: create (deduplicated per user), list, get and delete, always within one
 * (organization, agent) scope.
 */
import { createHash } from "node:crypto";
import { Prisma, type PrismaClient } from "@agentrun/db";
import { AppError, fieldRefused } from "@agentrun/errors";
import type { MemoryCategoryValue, MemoryEntryView, MemoryScope } from "@agentrun/contracts";
import { memoryIdTime, newMemoryId } from "./memory-id";
import { toMemoryView, type MemoryRow } from "./memory.view";

/** What the memory domain functions need. */
export interface MemoryServiceDeps {
  prisma: PrismaClient;
}

export interface CreateMemoryInput extends MemoryScope {
  user_id: string;
  /** Already trimmed by the contract's schema; trimmed again so direct callers agree. */
  content: string;
  /** `general` for a new entry when absent; an exact duplicate keeps its own unless given. */
  category?: MemoryCategoryValue;
}

export interface CreateMemoryResult {
  memory: MemoryEntryView;
  /**
   * False when the same user already had this exact content: that entry is returned, with the
   * request's category if it gave one.
   */
  created: boolean;
}

export interface ListMemoriesQuery extends MemoryScope {
  /** All users of the agent when absent. */
  user_id?: string;
  limit: number;
  /**
   * Only entries older than this one: an entry of the listed scope, or the id of an entry deleted
   * since, which still marks its place.
   */
  before?: string;
}

/**
 * Hex SHA-256 of the trimmed content in Unicode's composed form (NFC): the deduplication key with
 * (org, agent, user). "café" typed with a combining accent (NFD, as macOS file names and some
 * keyboards give it) looks, prints and is searched as the composed one, so it is the same entry.
 */
export function contentHash(content: string): string {
  return createHash("sha256").update(content.trim().normalize("NFC")).digest("hex");
}

/**
 * Stores a memory unless the user already has one with the same content; that entry then keeps
 * its id and creation time and takes the request's category if it gives one (the latest write
 * wins). Race-safe:
 * the insert is `ON CONFLICT DO NOTHING` on the unique (org, agent, user, content_hash) index, so
 * concurrent identical creates yield one row, and the losers update the winner's row.
 */
export async function createMemory({ prisma }: MemoryServiceDeps, input: CreateMemoryInput): Promise<CreateMemoryResult> {
  const content = input.content.trim();
  const key = { orgId: input.org_id, agentId: input.agent_id, userId: input.user_id, contentHash: contentHash(content) };
  // Two rounds cover an existing duplicate that is deleted between our insert and our update.
  for (let attempt = 0; attempt < 2; attempt++) {
    const [inserted] = await prisma.memoryEntry.createManyAndReturn({
      data: [{ ...newMemoryId(), ...key, content, category: input.category ?? "general" }],
      skipDuplicates: true,
    });
    if (inserted) return { memory: toMemoryView(inserted), created: true };
    const [existing] = input.category
      ? await prisma.memoryEntry.updateManyAndReturn({ where: key, data: { category: input.category } })
      : await prisma.memoryEntry.findMany({ where: key });
    if (existing) return { memory: toMemoryView(existing), created: false };
  }
  throw new Error("memory entry neither inserted nor found after two attempts");
}

/**
 * Where the `before` cursor stands in the list order. An existing entry must be of the listed
 * scope; an id no entry has any more (deleted since the page that ended with it) stands where its
 * entry stood, which its id tells. 400 for another scope's entry and for what is not a memory id.
 */
async function cursorPosition(prisma: PrismaClient, query: ListMemoriesQuery & { before: string }): Promise<{ id: string; createdAt: Date }> {
  const row = await prisma.memoryEntry.findUnique({ where: { id: query.before }, select: { id: true, createdAt: true, orgId: true, agentId: true, userId: true } });
  if (row) {
    const inScope = row.orgId === query.org_id && row.agentId === query.agent_id && (query.user_id === undefined || row.userId === query.user_id);
    if (!inScope) throw fieldRefused("before", `'before' names no memory entry of this ${query.user_id === undefined ? "agent" : "user"}.`);
    return { id: row.id, createdAt: row.createdAt };
  }
  const createdAt = memoryIdTime(query.before);
  if (!createdAt) throw fieldRefused("before", "'before' is not a memory id.");
  return { id: query.before, createdAt };
}

/**
 * A page of the scope's memories (one user's, or every user's of the agent), newest first, and
 * whether older ones follow: see {@link cursorPosition} for `before`.
 */
export async function listMemories({ prisma }: MemoryServiceDeps, query: ListMemoriesQuery): Promise<{ memories: MemoryEntryView[]; has_more: boolean }> {
  const cursor = query.before === undefined ? undefined : await cursorPosition(prisma, { ...query, before: query.before });
  // The cursor as one row comparison, which the (…, created_at DESC, id DESC) indexes start
  // from: OR-ed cases would make PostgreSQL read every newer entry, page after page.
  const rows = await prisma.$queryRaw<MemoryRow[]>(Prisma.sql`
    SELECT id, user_id AS "userId", content, category::text AS category, created_at AS "createdAt"
    FROM memory_entries
    WHERE org_id = ${query.org_id} AND agent_id = ${query.agent_id}
      ${query.user_id === undefined ? Prisma.empty : Prisma.sql`AND user_id = ${query.user_id}`}
      ${cursor ? Prisma.sql`AND (created_at, id) < (${cursor.createdAt}::timestamptz, ${cursor.id})` : Prisma.empty}
    ORDER BY created_at DESC, id DESC
    LIMIT ${query.limit + 1}`);
  return { memories: rows.slice(0, query.limit).map(toMemoryView), has_more: rows.length > query.limit };
}

/**
 * The entry `id` if it belongs to the scope: 404 `memory_not_found` when no entry has this id,
 * 403 `forbidden` when it belongs to another organization or agent.
 */
export async function getMemory({ prisma }: MemoryServiceDeps, scope: MemoryScope, id: string): Promise<MemoryEntryView> {
  const row = await prisma.memoryEntry.findUnique({ where: { id } });
  if (!row) throw new AppError("memory_not_found");
  if (row.orgId !== scope.org_id || row.agentId !== scope.agent_id) {
    throw new AppError("forbidden", { message: "This memory entry belongs to another organization or agent." });
  }
  return toMemoryView(row);
}

/** Deletes the entry `id` under the same 404/403 rules as {@link getMemory}. */
export async function deleteMemory(deps: MemoryServiceDeps, scope: MemoryScope, id: string): Promise<void> {
  await getMemory(deps, scope, id);
  const { count } = await deps.prisma.memoryEntry.deleteMany({ where: { id, orgId: scope.org_id, agentId: scope.agent_id } });
  // Deleted by a concurrent request between the check and the delete.
  if (count === 0) throw new AppError("memory_not_found");
}

