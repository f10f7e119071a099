/**
 * Turns a natural-language query into full-text search terms. Questions such as "what tea does
 * the user like" should match memories sharing any meaningful word, so the words are OR-ed
 * rather than AND-ed as `websearch_to_tsquery` would.
 */

/**
 * Words that appear in almost every memory ("User likes green tea", "The user's dog…") and so
 * say nothing about which memory is relevant. PostgreSQL's `english` configuration removes the
 * ordinary stop words itself.
 */
export const DOMAIN_STOP_WORDS: ReadonlySet<string> = new Set(["user", "users"]);

/**
 * Most distinct words taken from one query, bounding the SQL's size for a long query.
 * @defaultValue 64
 */
export const MAX_SEARCH_TERMS = 64;

/** Longer "words" are noise (hashes, base64) and PostgreSQL ignores them anyway. */
const MAX_TERM_LENGTH = 100;

/** A run of letters or digits; none of these characters is tsquery syntax. */
const WORD = /[\p{L}\p{N}]+/gu;

/**
 * The query's distinct, lower-cased words in order of first appearance, without domain stop
 * words, at most {@link MAX_SEARCH_TERMS}. Only letters and digits remain, so the words are safe
 * to join into `to_tsquery` syntax.
 */
export function searchTerms(query: string): string[] {
  const terms = new Set<string>();
  for (const [word] of query.toLowerCase().matchAll(WORD)) {
    if (word.length > MAX_TERM_LENGTH || DOMAIN_STOP_WORDS.has(word)) continue;
    terms.add(word);
    if (terms.size >= MAX_SEARCH_TERMS) break;
  }
  return [...terms];
}

/** `to_tsquery` input matching any of the terms, e.g. `tea | like`; empty when there are none. */
export function orTsQuery(terms: readonly string[]): string {
  return terms.join(" | ");
}
