/**
 * Removes secret values from serialized log lines. pino's `redact` removes fields by path, but a
 * secret also reaches the logs as text: an upstream error that quotes the request's
 * `Authorization` header ends up in an error's message and stack and in a `detail` string.
 */

/** What a secret, or a bearer token, is replaced with; the same word `redact` censors fields with. */
export const REDACTED = "[redacted]";

/**
 * Shorter values are not scrubbed: they would also erase ordinary words of every line (and
 * every secret the services take is longer).
 */
export const MIN_SECRET_LENGTH = 8;

/**
 * `Bearer <token>` in any case, as a provider's or proxy's error message quotes an Authorization
 * header. The token ends at whitespace, a quote or a backslash (the JSON escape of a quote or a
 * line break); 8 characters at least, so that prose such as "expected 'Bearer <API key>'" or a
 * challenge's `Bearer realm=` stays readable. No `i` flag: the secrets are matched by case.
 */
const BEARER = String.raw`\b([Bb][Ee][Aa][Rr][Ee][Rr])\s+[^\s"\\]{8,}`;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * A function that replaces, in a serialized log line, every occurrence of one of `secrets` (empty,
 * missing and short ones ignored) and every bearer token with {@link REDACTED}. One precompiled
 * RegExp makes it one pass over the line, which a log line per request can afford.
 */
export function secretScrubber(secrets: readonly (string | undefined)[] = []): (line: string) => string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret === undefined || secret.length < MIN_SECRET_LENGTH) continue;
    forms.add(secret);
    // As it is written inside a JSON string: a quote, backslash or control character is escaped.
    forms.add(JSON.stringify(secret).slice(1, -1));
  }
  // Longest first: a secret that contains another is replaced whole, not around the shorter one.
  const literals = [...forms].sort((a, b) => b.length - a.length).map(escapeRegExp);
  const pattern = new RegExp([...literals, BEARER].join("|"), "g");
  // A bearer match keeps its word, so that the line still says what was there.
  const replace = (_match: string, bearer: string | undefined) => (bearer === undefined ? REDACTED : `${bearer} ${REDACTED}`);
  return (line) => line.replace(pattern, replace);
}
