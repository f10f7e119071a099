/**
 * A service's effective settings as its start-up line shows them: every variable its schema read,
 * with the value it runs with (defaults included), secrets hidden. An operator then sees what a
 * process really runs with, not what the environment was meant to say.
 */

/** Variables whose value is a secret: a token, a secret, an API key (or a map of them), a password. */
const SECRET_NAME = /(^|_)(TOKEN|SECRET|API_KEYS?|PASSWORD)$/;

/** What a hidden secret shows instead of its value. */
export const HIDDEN = "[hidden]";

/** A URL's password replaced with `***` (`postgresql://app:***@db/agentrun`); anything else as it is. */
function withoutPassword(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(value) || !URL.canParse(value)) return value;
  const url = new URL(value);
  if (url.password === "") return value;
  url.password = "***";
  return url.toString();
}

function shown(name: string, value: unknown): unknown {
  if (SECRET_NAME.test(name)) return HIDDEN;
  return typeof value === "string" ? withoutPassword(value) : value;
}

/**
 * `config` (a {@link loadConfig} result) for a log line: secrets hidden, passwords taken out of
 * URLs, unset optional settings left out (and any parsed into a function).
 */
export function settingsForLog(config: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(config).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (value === undefined || typeof value === "function") continue;
    out[name] = shown(name, value);
  }
  return out;
}
