/**
 * Value parsers for commander options. Each is built for one flag so that its error names the
 * flag and the accepted values, e.g. `--credits must be an integer from 0 to 2147483647`; they
 * throw {@link UsageError}, which commander passes through unchanged.
 */
import { isIPv6 } from "node:net";
import type { Command } from "commander";
import { DEFAULT_PRICING } from "@agentrun/credits";
import { UsageError } from "./cli-errors";

/** Largest value of a PostgreSQL `integer` column (credit balances, rpm). */
export const MAX_INT32 = 2_147_483_647;

/** Parses a whole decimal number within `[min, max]`; rejects `1.5`, `1e3`, `10abc`, `-0x1`. */
export function intOption(flag: string, min: number, max = MAX_INT32): (value: string) => number {
  return (value) => {
    const text = value.trim();
    const n = Number(text);
    if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new UsageError(`${flag} must be an integer from ${min} to ${max}`);
    }
    return n;
  };
}

/** Parses a decimal number within `[min, max]`. */
export function numberOption(flag: string, min: number, max: number): (value: string) => number {
  return (value) => {
    const text = value.trim();
    const n = Number(text);
    if (text === "" || !/^-?(\d+\.?\d*|\.\d+)$/.test(text) || n < min || n > max) {
      throw new UsageError(`${flag} must be a number from ${min} to ${max}`);
    }
    return n;
  };
}

/** Accepts one of `choices` exactly. */
export function choiceOption<T extends string>(flag: string, choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${choices.join(", ")}`);
    return value as T;
  };
}

/**
 * Rejects empty or whitespace-only text and trims the rest. Its length is counted in characters
 * (code points), as the HTTP API counts it: an emoji is one character, not two UTF-16 units.
 */
export function textOption(flag: string, maxLength = 200): (value: string) => string {
  return (value) => {
    const text = value.trim();
    if (text === "") throw new UsageError(`${flag} must not be empty`);
    if ([...text].length > maxLength) throw new UsageError(`${flag} must be at most ${maxLength} characters`);
    return text;
  };
}

/**
 * A `--key` value as pasted: surrounding whitespace (a trailing `\r` too) and a leading `Bearer `
 * (any case) are dropped, so that a secret key copied from a header is still recognised as one.
 * A value with nothing else (`""`, `" \r"`, `"Bearer "`) is refused as empty.
 */
export function keyOption(flag: string): (value: string) => string {
  const text = textOption(flag);
  return (value) => text(value.trim().replace(/^Bearer(?:\s+|$)/i, ""));
}

/** Splits a comma-separated list, trimming items and dropping empty ones and duplicates. */
export function splitList(value: string): string[] {
  return [...new Set(value.split(",").map((s) => s.trim()).filter((s) => s !== ""))];
}

/** A comma-separated list whose items must all be among `allowed`; an empty value is an empty list. */
export function subsetOption<T extends string>(flag: string, allowed: readonly T[]): (value: string) => T[] {
  return (value) => {
    const items = splitList(value);
    const unknown = items.filter((i) => !(allowed as readonly string[]).includes(i));
    if (unknown.length > 0) throw new UsageError(`${flag}: unknown ${unknown.join(", ")} (allowed: ${allowed.join(", ")})`);
    return items as T[];
  };
}

// A DNS name, optionally `*.example.com` for its subdomains, or an IPv4 address. No port: the
// http tool matches the allow-list against the URL's host name alone.
const HOST_PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** An IPv6 address, with or without brackets, as a URL writes it (`[fd00::2]`); else null. */
function ipv6Host(host: string): string | null {
  const address = host.replace(/^\[(.*)\]$/, "$1");
  return isIPv6(address) ? new URL(`http://[${address}]/`).hostname : null;
}

/** A comma-separated list of host names (or IPv6 addresses, bracketed), lower-cased. */
export function hostListOption(flag: string): (value: string) => string[] {
  return (value) => {
    const hosts = splitList(value).map((h) => ipv6Host(h.toLowerCase()) ?? h.toLowerCase());
    const bad = hosts.filter((h) => !HOST_PATTERN.test(h) && ipv6Host(h) === null);
    if (bad.length > 0) throw new UsageError(`${flag}: not a host name: ${bad.join(", ")}`);
    return [...new Set(hosts)];
  };
}

/** An absolute http(s) URL, returned as given apart from surrounding whitespace. */
export function httpUrlOption(flag: string): (value: string) => string {
  return (value) => {
    const text = value.trim();
    const url = URL.canParse(text) ? new URL(text) : null;
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new UsageError(`${flag} must be an http(s) URL`);
    return text;
  };
}

/** A host as `URL` leaves it: lower-case letters, digits, dots, hyphens, underscores; or `[IPv6]`. */
const HOSTNAME = /^(?:[a-z0-9._-]+|\[[0-9a-f:.]+\])$/;

/**
 * Parses one browser origin: an http(s) scheme, a host and an optional port, nothing else (a
 * bare trailing `/` is tolerated). Returns `URL.origin`, which lower-cases the host and drops
 * a default port, so it compares equal to the `Origin` header browsers send.
 */
export function parseOrigin(flag: string, value: string): string {
  const fail = (): never => {
    throw new UsageError(`${flag}: not an origin (scheme://host[:port]): ${value}`);
  };
  if (!URL.canParse(value)) return fail();
  const url = new URL(value);
  const hasExtras = url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "";
  // `new URL` turns "https://a.example?" into an empty search, so check the raw text too.
  if (hasExtras || /[?#]/.test(value) || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") return fail();
  // Origins are matched exactly, and no browser sends a `*` in one.
  if (url.hostname.includes("*")) throw new UsageError(`${flag}: wildcards are not supported; list each origin (scheme://host[:port]): ${value}`);
  if (!HOSTNAME.test(url.hostname)) return fail();
  return url.origin;
}

/** A comma-separated list of origins (at least one), normalised with {@link parseOrigin}. */
export function originListOption(flag: string): (value: string) => string[] {
  return (value) => {
    const origins = splitList(value).map((o) => parseOrigin(flag, o));
    if (origins.length === 0) throw new UsageError(`${flag} must list at least one origin`);
    return [...new Set(origins)];
  };
}

/** The parts of an agent's pricing, each a credit count. */
const PRICING_PARTS = Object.keys(DEFAULT_PRICING);

/**
 * Largest credit count of one pricing part. A run's cost is capped (`MAX_RUN_COST` of
 * `@agentrun/credits`); parts this small keep ordinary runs well below that cap.
 */
export const MAX_PRICING_PART = 1_000_000;

/**
 * Parses `base=N,per_tool_call=N,per_1k_tokens=N` (any of the three, each an integer from 0 to
 * {@link MAX_PRICING_PART}); the parts left out keep the default of 1.
 */
export function pricingOption(flag: string): (value: string) => Record<string, number> {
  return (value) => {
    const pricing: Record<string, number> = {};
    for (const part of splitList(value)) {
      const [key, n, ...rest] = part.split("=").map((s) => s.trim());
      if (!key || n === undefined || rest.length || !PRICING_PARTS.includes(key) || key in pricing) {
        throw new UsageError(`${flag} takes ${PRICING_PARTS.map((p) => `${p}=N`).join(",")} (each at most once)`);
      }
      pricing[key] = intOption(`${flag} ${key}`, 0, MAX_PRICING_PART)(n);
    }
    if (Object.keys(pricing).length === 0) throw new UsageError(`${flag} must name at least one of ${PRICING_PARTS.join(", ")}`);
    return pricing;
  };
}

/**
 * Makes every option that takes a value, in `command` and all its subcommands, refuse to be given
 * twice (`--amount 5 --amount 7` is a usage error, not 7), and refuse one of the command's own
 * options as its value: commander gives a value-taking option the next word whatever it is, so
 * `org create --name --credits 5` would create an organization named `--credits`. Call it once
 * the commands are registered and before parsing; each parse needs a freshly built program, as
 * the options remember that they were seen.
 */
export function guardOptionValues(command: Command): void {
  const flags = new Set(command.options.flatMap((o) => [o.long, o.short]).filter((f): f is string => f !== undefined));
  flags.add("--help").add("-h");
  for (const option of command.options) {
    // Boolean flags (e.g. --help) carry no value that a repeat could silently replace.
    if (!option.required && !option.optional) continue;
    const parse = option.parseArg;
    const name = option.long ?? option.flags;
    let seen = false;
    option.argParser((value: string, previous: unknown) => {
      if (seen) throw new UsageError(`${name} given twice`);
      seen = true;
      const word = value.trim().split("=")[0]!;
      if (flags.has(word)) throw new UsageError(`${name} needs a value (got the option ${word})`);
      return parse ? parse(value, previous) : value;
    });
  }
  command.commands.forEach(guardOptionValues);
}
