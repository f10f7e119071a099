import { z } from "zod";
import { databaseUrl, dbPreparedStatements, dbQueryTimeoutMs, envBoolean, envInteger, httpUrl, internalToken, logLevel, MAX_TIMER_MS, redisPrefix, redisUrl, timerMs } from "@agentrun/config";
import { RUN_CANCEL_FLAG_TTL_S } from "@agentrun/events";

const modelApiKeysSchema = z.record(z.string().url(), z.string().min(1));

/** A base URL as keys are looked up by: without trailing slashes. */
export function baseUrlKey(url: string): string {
  return url.replace(/\/+$/, "");
}

/**
 * SHUTDOWN_GRACE_MS's largest value. A stopping worker's own deadline is this grace plus
 * SHUTDOWN_MARGIN_MS (5 s), and `npm start` kills a worker 10 s past the grace
 * (`callerStopGraceMs`): each must still fit a timer, or it fires at once, the worker's runs being
 * stopped, or the worker killed, as SIGTERM arrives.
 */
export const SHUTDOWN_GRACE_MAX_MS = MAX_TIMER_MS - 10_000;

/**
 * LOCK_DURATION_MS's largest value: a worker taking a run over waits with a timer for the previous
 * worker's heartbeat, which lives this long, to lapse, a wait bounded by twice this (claimRun).
 */
export const LOCK_DURATION_MAX_MS = Math.floor(MAX_TIMER_MS / 2);

/** The agent worker's environment. */
export const workerConfigSchema = z.object({
  DATABASE_URL: databaseUrl,
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
  DB_QUERY_TIMEOUT_MS: dbQueryTimeoutMs,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: redisPrefix,
  LOG_LEVEL: logLevel,
  /** Name of this worker process in heartbeats and on runs, one per process (default: host name and a random suffix). */
  WORKER_ID: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/).optional(),
  /** Runs executed at once by one worker process. */
  WORKER_CONCURRENCY: envInteger(1, 1000).default(16),
  /** Key for a hosted OpenAI-compatible model; without it every agent uses the scripted model. */
  OPENAI_API_KEY: z.string().optional(),
  /** Base URL of the hosted model when OPENAI_API_KEY is set (default: OpenAI's). */
  OPENAI_BASE_URL: httpUrl.optional(),
  /**
   * Keys for agents' own base URLs, as a JSON object `{"<base url>": "<key>"}`. OPENAI_API_KEY
   * goes only to OPENAI_BASE_URL; an agent whose base URL is not listed here is sent no key.
   */
  MODEL_API_KEYS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw.trim() === "") return {};
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch {
        // Reported below, like any other shape that is not an object of URLs to keys.
      }
      const parsed = modelApiKeysSchema.safeParse(json);
      if (parsed.success) return Object.fromEntries(Object.entries(parsed.data).map(([url, key]) => [baseUrlKey(url), key]));
      ctx.addIssue({ code: "custom", message: 'must be a JSON object of base URLs to keys, e.g. {"https://api.example.com/v1":"sk-..."}' });
      return z.NEVER;
    }),
  /** The scripted model, used by agents with model "scripted" and whenever no key is set. */
  SCRIPTED_MODEL_URL: httpUrl.default("http://127.0.0.1:4010/v1"),
  /** Longest a whole model call may take. */
  MODEL_TIMEOUT_MS: timerMs().default(120_000),
  /** Longest wait for the first or next streamed chunk. */
  MODEL_IDLE_TIMEOUT_MS: timerMs().default(30_000),
  /** Longest a whole run may take once claimed, model calls and tools included (`run_timeout`). */
  RUN_TIMEOUT_MS: timerMs().default(3_600_000),
  /** Retries of a model call on connection errors, 429 and 5xx before any output was streamed. */
  MODEL_MAX_RETRIES: envInteger(0, 10).default(2),
  MEMORY_URL: httpUrl.default("http://127.0.0.1:3002"),
  INTERNAL_TOKEN: internalToken,
  MEMORY_TIMEOUT_MS: timerMs().default(2000),
  /** Most memories, and most characters of them, put into a run's prompt. */
  MEMORY_PROMPT_MAX_COUNT: envInteger(0, 100).default(20),
  MEMORY_PROMPT_MAX_CHARS: envInteger(0, 100_000).default(4000),
  /** Earlier messages of the task sent to the model, and most characters of them (the newest that fit). */
  HISTORY_MAX_MESSAGES: envInteger(0, 1000).default(50),
  HISTORY_MAX_CHARS: envInteger(0, 10_000_000).default(100_000),
  HTTP_TOOL_TIMEOUT_MS: timerMs().default(5000),
  HTTP_TOOL_MAX_BYTES: envInteger(1).default(100_000),
  /** Lets the http tool reach private and loopback addresses (for local development only). */
  HTTP_TOOL_ALLOW_PRIVATE: envBoolean.default(false),
  /**
   * A job whose worker stops renewing its lock for this long is taken over; also the run
   * heartbeat's lifetime. At least a second: a shorter one expires between renewals.
   */
  LOCK_DURATION_MS: timerMs(1000, LOCK_DURATION_MAX_MS, "a worker taking a run over may wait twice this, and a timer waits at most 2147483647 ms").default(10_000),
  /** How often BullMQ looks for stalled jobs (a script over the active jobs; at least 500 ms). */
  STALLED_INTERVAL_MS: timerMs(500).default(5_000),
  /**
   * A running run started longer ago than this is looked at by the orphan sweeper (one
   * LOCK_DURATION_MS by default: a live worker's heartbeat is set by then).
   */
  RUN_STALE_AFTER_MS: timerMs(1000).default(10_000),
  /** A queued run older than this whose job is missing or failed is put back on the queue. */
  QUEUED_STALE_AFTER_MS: timerMs(1000).default(15_000),
  /**
   * A queued run older than this whose job is missing or failed is ended (`unavailable`) instead
   * of being queued again: after a long outage nobody is waiting for it any more. At most a day:
   * a run's cancel flag (RUN_CANCEL_FLAG_TTL_S) must outlive its wait.
   */
  QUEUED_MAX_AGE_MS: timerMs(1, RUN_CANCEL_FLAG_TTL_S * 1000, "a run's cancel flag lives a day").default(3_600_000),
  /** On SIGTERM, how long active runs may still finish before they are stopped. */
  SHUTDOWN_GRACE_MS: timerMs(0, SHUTDOWN_GRACE_MAX_MS, "a stopping worker is killed 10 s past it, and a timer waits at most 2147483647 ms").default(10_000),
});

export type WorkerConfig = z.infer<typeof workerConfigSchema>;
