/**
 * Turns a natural-language query into full-text search terms. Questions such as "what tea does
 * the user like" should match memories sharing any meaningful word, so the words are OR-ed
 * rather than AND-ed as `websearch_to_tsquery` would.
 *
 * PostgreSQL splits the query, with the parser and dictionaries that made each entry's search
 * document (`to_tsvector('english', …)` of the NFC form), so that both sides agree on what a word
 * is: scripts whose words hold combining marks (Hindi, Thai, Tamil), addresses, host names and
 * numbers such as `bob@example.com`, `acme.io` or `3.50` (one lexeme each, besides their parts
 * where the parser gives them), and the same stems and stop words.
 */
import { Prisma } from "@agentrun/db";

/**
 * Lexemes that appear in almost every memory ("User likes green tea", "The user's dog…") and so
 * say nothing about which memory is relevant ("users" and "user's" stem to "user"). PostgreSQL's
 * `english` configuration removes the ordinary stop words itself.
 */
export const DOMAIN_STOP_WORDS: readonly string[] = ["user"];

/**
 * Most distinct lexemes taken from one query (the first ones in it, stop words not counted),
 * bounding the search's cost for a long query.
 * @defaultValue 64
 */
export const MAX_SEARCH_TERMS = 64;

/** Longer "words" are noise (hashes, base64). */
const MAX_TERM_LENGTH = 100;

/**
 * Runs of letters of scripts written without spaces between words (Chinese, Japanese, Thai, Lao,
 * Khmer, Burmese), or, for Korean, with endings joined to them: PostgreSQL's parser takes such a
 * run as one word, so "緑茶" would never match "ユーザーは緑茶が好きです". The Katakana long
 * vowel mark (ー) belongs to no script and is taken with them.
 */
const UNSPACED_RUN = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}\u30FC\uFF70]+/gu;

/**
 * The pairs of neighbouring characters of the query's unspaced runs (see UNSPACED_RUN), or a
 * run's one character, in the NFC form, at most {@link MAX_SEARCH_TERMS} of them: an entry
 * containing one of them shares that much of the query, as bigram indexes of these languages
 * count it ("緑茶が好き" gives 緑茶, 茶が, が好, 好き).
 */
export function characterGrams(query: string): string[] {
  const grams = new Set<string>();
  for (const [run] of query.normalize("NFC").matchAll(UNSPACED_RUN)) {
    const chars = [...run];
    if (chars.length === 1) grams.add(chars[0]!);
    for (let i = 0; i + 1 < chars.length; i++) grams.add(chars[i]! + chars[i + 1]!);
  }
  return [...grams].slice(0, MAX_SEARCH_TERMS);
}

/** Whether `query` holds anything PostgreSQL could take for a word: a letter or a digit. */
export function mayHoldSearchTerms(query: string): boolean {
  return /[\p{L}\p{N}]/u.test(query);
}

/**
 * A CTE `q` of one row: `query`, a tsquery OR-ing the query's lexemes (NULL when it has none,
 * which matches nothing), and `lexemes`, the same as an array. The lexemes are quoted into the
 * tsquery as they are, not parsed again.
 */
export function searchTermsCte(query: string): Prisma.Sql {
  return Prisma.sql`
    words AS (
      SELECT w.lexeme FROM unnest(to_tsvector('english', agentrun_nfc(${query}))) AS w
      WHERE w.lexeme <> ALL (${DOMAIN_STOP_WORDS}::text[]) AND length(w.lexeme) <= ${MAX_TERM_LENGTH}
      ORDER BY w.positions[1], w.lexeme
      LIMIT ${MAX_SEARCH_TERMS}
    ), q AS (
      SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ')::tsquery AS query,
             array_agg(lexeme) AS lexemes
      FROM words
    )`;
}
