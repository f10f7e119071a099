/**
 * Environment parsing shared by every service. Each service declares one zod schema in its own
 * `config.ts` from the fragments below and calls {@link loadConfig} once at boot.
 */
import { z } from "zod";

/** Thrown by {@link loadConfig}; its message names every bad or missing variable on one line. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Booleans as operators write them: true/false, 1/0, yes/no. */
export const envBoolean = z
  .enum(["true", "false", "1", "0", "yes", "no", "TRUE", "FALSE"])
  .transform((v) => ["true", "1", "yes", "TRUE"].includes(v));

/** A TCP port as digits, 0 to 65535 (0: any free port): not `0x50`, `1e3` or `80.0`. */
const portNumber = z
  .string()
  .trim()
  .regex(/^\d{1,5}$/, "must be a port number, 0 to 65535")
  .transform(Number)
  .refine((n) => n <= 65535, "must be a port number, 0 to 65535");

export const port = (def: number) => portNumber.default(def);

/**
 * The port variable of a service that runs beside the gateway (`MEMORY_PORT`,
 * `SCRIPTED_MODEL_PORT`). When set it wins over `PORT`, which an environment exported for the
 * whole stack (.env.example) sets for the gateway.
 * @defaultValue unset
 */
export const ownPort = portNumber.optional();

/**
 * The address a service beside the gateway listens on (`MEMORY_HOST`, `SCRIPTED_MODEL_HOST`):
 * unset, every interface (what a container needs); `127.0.0.1` keeps it to this machine, as
 * `npm run dev` does.
 * @defaultValue unset
 */
export const listenHost = z.string().trim().min(1).max(255).optional();

/** The local defaults that `npm run dev` uses. */
export const DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/agentrun";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/**
 * DB_PREPARED_STATEMENTS: run statements as named prepared statements (parsed and planned once
 * per connection). Off behind a pooler in transaction mode that does not track them.
 */
export const dbPreparedStatements = envBoolean.default(true);

/** The longest delay a Node.js timer can wait: a longer one fires at once (after 1 ms). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * An integer variable (a count, a size, a duration) as operators write it: decimal digits, from
 * `min` to `max`. Not `0x10`, `0b101`, `1e3` or `5.0`, which `Number` reads as 16, 5, 1000 and 5:
 * a value is taken for what it says or refused, as a port is. One message for both, naming the
 * range (and `why` it ends there, when that is not obvious).
 */
export function envInteger(min: number, max = Number.MAX_SAFE_INTEGER, { what = "a whole number", why }: { what?: string; why?: string } = {}) {
  const range = max === Number.MAX_SAFE_INTEGER ? `${min} or more` : `${min} to ${max}`;
  const message = `must be ${what}, ${range}${why ? ` (${why})` : ""}`;
  return z
    .string()
    .trim()
    .regex(/^-?\d+$/, message)
    .transform(Number)
    .refine((n) => n >= min && n <= max, message);
}

/**
 * A duration in milliseconds that the service waits with a timer: an integer from `min` to `max`,
 * at most MAX_TIMER_MS (about 24.8 days), so that a large value cannot turn into an immediate
 * timeout. A duration that the service adds to something, or multiplies, before it sets a timer
 * takes a `max` that keeps the result within MAX_TIMER_MS, and says `why`.
 */
export const timerMs = (min = 1, max = MAX_TIMER_MS, why?: string) =>
  envInteger(min, Math.min(max, MAX_TIMER_MS), { what: "a duration in milliseconds", why: why ?? (max >= MAX_TIMER_MS ? "the longest a timer waits" : undefined) });

/**
 * DB_QUERY_TIMEOUT_MS: longest wait for PostgreSQL's answer to one statement. A server that stops
 * answering (frozen, or a network partition) then makes requests fail with 503 instead of hang.
 * @defaultValue 5000
 */
export const dbQueryTimeoutMs = timerMs(100, 600_000).default(5000);

export const databaseUrl = z
  .string()
  .url()
  .refine((u) => /^postgres(ql)?:\/\//.test(u), "must be a postgresql:// URL")
  .default(DEFAULT_DATABASE_URL);

/** The URL of an HTTP service (the memory service, a model endpoint): `localhost:3002` without its scheme is refused. */
export const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\/[^/]/i.test(u), "must be an http:// or https:// URL");

export const redisUrl = z
  .string()
  .url()
  .refine((u) => /^rediss?:\/\//.test(u), "must be a redis:// URL")
  // ioredis sends the path as SELECT's argument: `/abc` failed every connection after start-up.
  .refine((u) => !URL.canParse(u) || /^(\/\d{0,9})?$/.test(new URL(u).pathname), "its path must be a database number (redis://host:6379/0) or nothing")
  .default(DEFAULT_REDIS_URL);

export const logLevel = z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info");

/**
 * Prefix for every Redis key, channel and BullMQ queue of one deployment, so that several
 * deployments (or test runs) can share a Redis server.
 * @defaultValue "agentrun"
 */
export const redisPrefix = z.string().regex(/^[A-Za-z0-9_:-]+$/).default("agentrun");

/** INTERNAL_TOKEN's default, published with the code. */
export const DEV_INTERNAL_TOKEN = "agentrun-dev-internal-token";

/**
 * Shared secret between services for the internal APIs (memory service). It travels as a Bearer
 * token, so spaces, a line break (a secret file's last newline) or characters outside printable
 * ASCII are refused at start-up: a client's HTTP stack drops or refuses them, and the memory
 * service would then refuse every call.
 */
export const internalToken = z
  .string()
  .min(16)
  .regex(/^[!-~]+$/, "must be printable ASCII without spaces or line breaks (it is sent as a Bearer token)")
  .default(DEV_INTERNAL_TOKEN);

/**
 * Whether a secret is a published value, which production must not run with: its development
 * default (`dev`), or a `change-me…` placeholder such as docker-compose.yml's.
 */
export function isPublishedSecret(value: string, dev: string): boolean {
  return value === dev || value.startsWith("change-me");
}

/** The variables an object schema reads (its input's keys, before any transform renames them). */
function readVariables(schema: z.ZodTypeAny): Set<string> {
  const s = schema as unknown as { shape?: object; in?: { shape?: object } };
  return new Set(Object.keys(s.shape ?? s.in?.shape ?? {}));
}

/**
 * Parses `env` with `schema`. On failure throws a {@link ConfigError} whose message lists every
 * bad variable, e.g. `invalid environment: PORT: must be a port number, 0 to 65535; REDIS_URL: ...`.
 */
export function loadConfig<S extends z.ZodTypeAny>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  // Empty strings count as unset, so `FOO=` in a .env file falls back to the default.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== "")) as Record<string, string>;
  // A blank value (spaces, a line break) of a variable the service reads is neither a value nor
  // unset: a number read it as 0, a secret would fall back to its published default. It is
  // reported as blank, whatever its schema made of it.
  const read = readVariables(schema);
  const blank = new Set(Object.keys(cleaned).filter((name) => cleaned[name]!.trim() === "" && read.has(name)));
  const res = schema.safeParse(cleaned);
  if (res.success && blank.size === 0) return res.data;
  const issues = res.success ? [] : res.error.issues.filter((i) => !blank.has(String(i.path[0])));
  const parts = [...[...blank].map((name) => `${name}: is blank (give it a value, or leave it empty for its default)`), ...issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)];
  throw new ConfigError(`invalid environment: ${parts.join("; ")}`);
}

/**
 * Runs a service's `main`, printing a configuration error as one line and exiting 1, and any
 * other start-up failure with its message.
 */
export function runMain(main: () => Promise<unknown>): void {
  main().catch((err: unknown) => {
    const msg = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${err instanceof ConfigError ? "" : "start-up failed: "}${msg}\n`);
    process.exit(1);
  });
}

/**
 * The host part of a URL that reaches a service listening on `listenHost` (a MEMORY_HOST, say)
 * from this machine: that address, an IPv6 one in brackets, or the loopback address for the
 * wildcard addresses and when none is set (127.0.0.1 is the development default).
 */
export function urlHostFor(listenHost: string | undefined): string {
  const h = listenHost?.trim() ?? "";
  if (h === "" || h === "0.0.0.0") return "127.0.0.1";
  if (h === "::" || h === "[::]") return "[::1]";
  return h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
}

export { onStopRequest } from "./stop-request";
export { HIDDEN, settingsForLog } from "./settings-for-log";
