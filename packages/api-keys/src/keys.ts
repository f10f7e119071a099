import { createHash } from "node:crypto";
import { randomBase62 } from "./base62";

/** Leading text of every secret API key. */
export const API_KEY_PREFIX = "ar_live_";
/** Random base62 characters after {@link API_KEY_PREFIX}: 32 × log2(62) ≈ 190 bits. */
export const API_KEY_RANDOM_LENGTH = 32;
/** How many leading characters of a key are stored and shown, e.g. `ar_live_AbCd`. */
export const API_KEY_DISPLAY_PREFIX_LENGTH = 12;
/** Leading text of every publishable widget key. */
export const WIDGET_KEY_PREFIX = "pk_";
/** Random base62 characters after {@link WIDGET_KEY_PREFIX}. */
export const WIDGET_KEY_RANDOM_LENGTH = 24;

const API_KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${API_KEY_RANDOM_LENGTH}}$`);
const WIDGET_KEY_PATTERN = new RegExp(`^${WIDGET_KEY_PREFIX}[0-9A-Za-z]{${WIDGET_KEY_RANDOM_LENGTH}}$`);

/** A freshly generated secret key and what may be stored about it. */
export interface GeneratedApiKey {
  /** The whole key; shown to the operator once and never stored. */
  apiKey: string;
  /** The first {@link API_KEY_DISPLAY_PREFIX_LENGTH} characters, for display. */
  prefix: string;
  /** {@link hashApiKey} of the key: what the database keeps and looks keys up by. */
  keyHash: string;
}

/** SHA-256 of a key as lower-case hex. Keys are long random strings, so no salt or slow hash is needed. */
export function hashApiKey(apiKey: string): string {
  return createHash("sha256").update(apiKey, "utf8").digest("hex");
}

/** Generates a secret API key (`ar_live_` + 32 base62 characters) with its display prefix and hash. */
export function generateApiKey(): GeneratedApiKey {
  const apiKey = `${API_KEY_PREFIX}${randomBase62(API_KEY_RANDOM_LENGTH)}`;
  return { apiKey, prefix: apiKey.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH), keyHash: hashApiKey(apiKey) };
}

/** Generates a publishable widget key (`pk_` + 24 base62 characters); it is not a secret. */
export function generateWidgetKey(): string {
  return `${WIDGET_KEY_PREFIX}${randomBase62(WIDGET_KEY_RANDOM_LENGTH)}`;
}

/**
 * True when `value` has the shape of a secret API key. A format check only: it lets callers
 * reject garbage without a database lookup, it says nothing about whether the key exists.
 */
export function looksLikeApiKey(value: unknown): value is string {
  return typeof value === "string" && API_KEY_PATTERN.test(value);
}

/** True when `value` has the shape of a publishable widget key (format check only). */
export function looksLikeWidgetKey(value: unknown): value is string {
  return typeof value === "string" && WIDGET_KEY_PATTERN.test(value);
}
