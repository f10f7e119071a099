/**
 * Relevance search over one user's memories with PostgreSQL full-text search, and the choice
 * of memories for a run's prompt.
 */
import { Prisma } from "@agentrun/db";
import type { MemoryCategoryValue, MemoryEntryView, MemoryScope } from "@agentrun/contracts";
import { listMemories, type MemoryServiceDeps } from "./memory.service";
import { toMemoryView } from "./memory.view";
import { characterGrams, mayHoldSearchTerms, searchTermsCte } from "./search-terms";

export interface SearchMemoriesInput extends MemoryScope {
  user_id: string;
  query: string;
  limit: number;
}

/** A search hit: the entry and its relevance (higher is more relevant, always positive). */
export type ScoredMemoryView = MemoryEntryView & { score: number };

export interface MemoryContextInput extends MemoryScope {
  user_id: string;
  query: string;
  /** Most entries returned. */
  max_count: number;
  /** Most characters of content, summed over the entries returned. */
  max_chars: number;
}

interface SearchRow {
  id: string;
  user_id: string;
  content: string;
  category: MemoryCategoryValue;
  created_at: Date;
  score: number;
}

/**
 * How many of a user's entries, the newest, a search reads: it reads each one (the (org, agent,
 * user) index narrows them, the words do not), so this bounds its cost for a user who saved
 * without end. Older entries stay listed, but are no longer found by relevance.
 * @defaultValue 10,000
 */
export const MAX_SEARCHED_ENTRIES = 10_000;

/**
 * How many of the entries sharing the most words with the query (the newest first among equal
 * ones) are ranked by cover density: ranking every match of a long query costs seconds.
 */
const MIN_RANKED_CANDIDATES = 200;

/**
 * The user's memories relevant to `query`, best first.
 *
 * The query's lexemes (see {@link searchTermsCte}: PostgreSQL's `english` configuration splits,
 * stems and drops stop words, as it did for the entries) are OR-ed into a tsquery; an entry
 * matches when its search document shares at least one lexeme, or its text one of the query's
 * character pairs of scripts written without spaces (see characterGrams). Its score is
 * `distinct query lexemes and character pairs it contains + r / (r + 1)` with `r = ts_rank_cd(…)`: covering more of
 * the query's words always ranks higher, and among equal coverage the cover density decides
 * (the fraction stays below 1), within the {@link MIN_RANKED_CANDIDATES} (or five times `limit`)
 * entries covering the most (the newest first among equal ones). Ties go to the newest entry,
 * then the highest id. Each entry's tsvector is stored with it (`search_doc`, set by a trigger on
 * write), so a search reads the user's newest {@link MAX_SEARCHED_ENTRIES} entries, which the
 * (org, agent, user) index narrows first, without parsing any again.
 */
export async function searchMemories({ prisma }: MemoryServiceDeps, input: SearchMemoriesInput): Promise<ScoredMemoryView[]> {
  if (!mayHoldSearchTerms(input.query)) return [];
  // The query's character pairs of unspaced scripts (see characterGrams) that the entry's text
  // contains, each counting as a shared word; none to look for without such scripts.
  const grams = characterGrams(input.query);
  // The entry's NFC text is made once per entry (the fence keeps it from being made per pair).
  const gramsFound =
    grams.length === 0
      ? Prisma.sql`(SELECT 0 AS grams) f`
      : Prisma.sql`(SELECT agentrun_nfc(m.content) AS text OFFSET 0) n
          CROSS JOIN LATERAL (SELECT count(*)::int AS grams FROM unnest(${grams}::text[]) AS g(gram) WHERE strpos(n.text, g.gram) > 0) f`;
  const rows = await prisma.$queryRaw<SearchRow[]>(Prisma.sql`
    WITH ${searchTermsCte(input.query)}, m AS (
      SELECT e.id, e.user_id, e.content, e.category::text AS category, e.created_at,
             e.search_doc AS doc
      FROM memory_entries e
      WHERE e.org_id = ${input.org_id} AND e.agent_id = ${input.agent_id} AND e.user_id = ${input.user_id}
      ORDER BY e.created_at DESC, e.id DESC
      LIMIT ${MAX_SEARCHED_ENTRIES}
    ), covered AS (
      SELECT m.*, COALESCE(length(m.doc) - length(ts_delete(m.doc, q.lexemes)), 0) + f.grams AS shared
      FROM m CROSS JOIN q CROSS JOIN LATERAL ${gramsFound}
      WHERE m.doc @@ q.query OR f.grams > 0
      ORDER BY shared DESC, m.created_at DESC, m.id DESC
      LIMIT ${Math.max(input.limit * 5, MIN_RANKED_CANDIDATES)}
    )
    SELECT c.id, c.user_id, c.content, c.category, c.created_at, (c.shared + COALESCE(ts_rank_cd(c.doc, q.query, 32), 0))::float8 AS score
    FROM covered c CROSS JOIN q
    ORDER BY score DESC, c.created_at DESC, c.id DESC
    LIMIT ${input.limit}
  `);
  return rows
    .filter((r) => r.score > 0)
    .map((r) => ({
      ...toMemoryView({ id: r.id, userId: r.user_id, content: r.content, category: r.category, createdAt: r.created_at }),
      score: r.score,
    }));
}

/**
 * How many entries a prompt's choice of memories reads at most, relevant and newest together:
 * a user whose many entries each no longer fit the budgets costs a bounded read.
 */
export const MAX_CONTEXT_CANDIDATES = 1_000;

/** Entries read per page of the newest ones, after the first page. */
const CONTEXT_PAGE = 100;

/**
 * The memories to put into a run's prompt, in this order: the entries relevant to `query` (as
 * ranked by {@link searchMemories}, at least twice `max_count` or 50 of them), then the user's
 * newest entries not already chosen, read page after page. Walking that list, an entry is taken
 * when it still fits both budgets (`max_count` entries, `max_chars` content characters) and
 * skipped otherwise, so a long entry does not block shorter ones after it, until both budgets
 * are full, the entries run out or {@link MAX_CONTEXT_CANDIDATES} have been read. A user whose
 * memories fit the budgets therefore always gets all of them.
 *
 * Once `signal` aborts (the caller has gone), no further page is read and what was chosen so far
 * is returned: a caller that gave up at its timeout must not keep the pool busy for the next.
 */
export async function memoryContext(deps: MemoryServiceDeps, input: MemoryContextInput, signal?: AbortSignal): Promise<MemoryEntryView[]> {
  const scope = { org_id: input.org_id, agent_id: input.agent_id, user_id: input.user_id };
  const relevantLimit = Math.min(MAX_CONTEXT_CANDIDATES, Math.max(2 * input.max_count, 50));
  const relevant = await searchMemories(deps, { ...scope, query: input.query, limit: relevantLimit });

  const chosen: MemoryEntryView[] = [];
  const seen = new Set<string>();
  let chars = 0;
  // Every entry holds at least one character, so none fits once max_chars are taken.
  const full = () => chosen.length >= input.max_count || chars >= input.max_chars;
  const offer = (entry: MemoryEntryView) => {
    if (full() || seen.has(entry.memory_id) || chars + entry.content.length > input.max_chars) return;
    seen.add(entry.memory_id);
    chosen.push(entry);
    chars += entry.content.length;
  };
  for (const entry of relevant) offer(withoutScore(entry));

  let read = relevant.length;
  // The first page: enough to fill max_count even when all the relevant entries are among them.
  let limit = input.max_count + relevant.length;
  let before: string | undefined;
  while (!full() && read < MAX_CONTEXT_CANDIDATES && !signal?.aborted) {
    const page = await listMemories(deps, { ...scope, before, limit: Math.min(limit, MAX_CONTEXT_CANDIDATES - read) });
    page.memories.forEach(offer);
    read += page.memories.length;
    if (!page.has_more || page.memories.length === 0) break;
    before = page.memories[page.memories.length - 1]!.memory_id;
    limit = CONTEXT_PAGE;
  }
  return chosen;
}

function withoutScore({ score: _score, ...view }: ScoredMemoryView): MemoryEntryView {
  return view;
}
