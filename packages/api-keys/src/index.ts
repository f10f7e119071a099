/**
 * Key material: secret API keys (`ar_live_…`, stored only as a SHA-256 hash and a display
 * prefix) and publishable widget keys (`pk_…`). Random characters come from the OS CSPRNG.
 */
export { randomBase62, BASE62_ALPHABET } from "./base62";
export {
  generateApiKey,
  hashApiKey,
  generateWidgetKey,
  looksLikeApiKey,
  looksLikeWidgetKey,
  type GeneratedApiKey,
  API_KEY_PREFIX,
  API_KEY_RANDOM_LENGTH,
  API_KEY_DISPLAY_PREFIX_LENGTH,
  WIDGET_KEY_PREFIX,
  WIDGET_KEY_RANDOM_LENGTH,
} from "./keys";
