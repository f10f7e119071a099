import { ConfigError, loadConfig, MAX_TIMER_MS } from "@agentrun/config";
import { SHUTDOWN_MARGIN_MS } from "./agent-worker";
import { LOCK_DURATION_MAX_MS, SHUTDOWN_GRACE_MAX_MS, workerConfigSchema } from "./config";

describe("worker config", () => {
  it.each(["MEMORY_URL", "SCRIPTED_MODEL_URL", "OPENAI_BASE_URL"])("refuses %s without an http(s) scheme, naming it", (name) => {
    for (const value of ["localhost:3002", "127.0.0.1:3002/v1", "ftp://127.0.0.1/", "http:/x"]) {
      expect(() => loadConfig(workerConfigSchema, { [name]: value })).toThrow(ConfigError);
      expect(() => loadConfig(workerConfigSchema, { [name]: value })).toThrow(new RegExp(name));
    }
    expect(loadConfig(workerConfigSchema, { [name]: "https://models.example/v1" })[name as "MEMORY_URL"]).toBe("https://models.example/v1");
  });

  it.each(["MODEL_TIMEOUT_MS", "MODEL_IDLE_TIMEOUT_MS", "HTTP_TOOL_TIMEOUT_MS", "RUN_TIMEOUT_MS"])("refuses a %s a timer cannot wait (it would fire at once)", (name) => {
    expect(() => loadConfig(workerConfigSchema, { [name]: "3000000000" })).toThrow(new RegExp(name));
    expect(loadConfig(workerConfigSchema, { [name]: "2147483647" })[name as "MODEL_TIMEOUT_MS"]).toBe(2_147_483_647);
  });

  it("refuses a SHUTDOWN_GRACE_MS whose shutdown deadlines a timer cannot wait: the runs were stopped 18 ms after SIGTERM", () => {
    expect(() => loadConfig(workerConfigSchema, { SHUTDOWN_GRACE_MS: "2147483647" })).toThrow(
      "invalid environment: SHUTDOWN_GRACE_MS: must be a duration in milliseconds, 0 to 2147473647 (a stopping worker is killed 10 s past it, and a timer waits at most 2147483647 ms)",
    );
    expect(loadConfig(workerConfigSchema, { SHUTDOWN_GRACE_MS: "2147473647" }).SHUTDOWN_GRACE_MS).toBe(SHUTDOWN_GRACE_MAX_MS);
    // The worker's own deadline, and npm start's (scripts/stack-supervisor.ts: 10 s more), fit a timer.
    expect(SHUTDOWN_GRACE_MAX_MS + SHUTDOWN_MARGIN_MS).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(SHUTDOWN_GRACE_MAX_MS + 10_000).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(loadConfig(workerConfigSchema, { SHUTDOWN_GRACE_MS: "0" }).SHUTDOWN_GRACE_MS).toBe(0);
  });

  it("refuses a LOCK_DURATION_MS whose double (a run taken over waits out its heartbeat) a timer cannot wait", () => {
    expect(() => loadConfig(workerConfigSchema, { LOCK_DURATION_MS: "1073741824" })).toThrow(/^invalid environment: LOCK_DURATION_MS: must be a duration in milliseconds, 1000 to 1073741823 /);
    expect(loadConfig(workerConfigSchema, { LOCK_DURATION_MS: "1073741823" }).LOCK_DURATION_MS).toBe(LOCK_DURATION_MAX_MS);
    expect(2 * LOCK_DURATION_MAX_MS).toBeLessThanOrEqual(MAX_TIMER_MS);
  });

  it.each([
    ["hex", "MODEL_TIMEOUT_MS", "0x10"],
    ["binary", "MODEL_TIMEOUT_MS", "0b101"],
    ["exponent", "RUN_TIMEOUT_MS", "1e3"],
    ["decimal point", "SHUTDOWN_GRACE_MS", "1000.0"],
    ["hex", "WORKER_CONCURRENCY", "0x10"],
    ["exponent", "MODEL_MAX_RETRIES", "1e0"],
    ["binary", "HISTORY_MAX_MESSAGES", "0b11"],
    ["exponent", "HTTP_TOOL_MAX_BYTES", "1e5"],
    ["hex", "DB_QUERY_TIMEOUT_MS", "0x1000"],
  ])("refuses a number in %s notation (%s=%s), as a port is refused", (_form, name, value) => {
    expect(() => loadConfig(workerConfigSchema, { [name]: value })).toThrow(new RegExp(`^invalid environment: ${name}: must be (a whole number|a duration in milliseconds), `));
  });

  it("keeps every default, and takes the same values in decimal digits", () => {
    const defaults = loadConfig(workerConfigSchema, {});
    expect(defaults).toMatchObject({ WORKER_CONCURRENCY: 16, MODEL_MAX_RETRIES: 2, MODEL_TIMEOUT_MS: 120_000, HTTP_TOOL_MAX_BYTES: 100_000, HISTORY_MAX_CHARS: 100_000, LOCK_DURATION_MS: 10_000, SHUTDOWN_GRACE_MS: 10_000, DB_QUERY_TIMEOUT_MS: 5000 });
    expect(loadConfig(workerConfigSchema, { WORKER_CONCURRENCY: "16", MODEL_TIMEOUT_MS: " 1000 ", MODEL_MAX_RETRIES: "0" })).toMatchObject({ WORKER_CONCURRENCY: 16, MODEL_TIMEOUT_MS: 1000, MODEL_MAX_RETRIES: 0 });
  });

  it("refuses a QUEUED_MAX_AGE_MS longer than a run's cancel flag lives (a day)", () => {
    expect(() => loadConfig(workerConfigSchema, { QUEUED_MAX_AGE_MS: "86400001" })).toThrow(/QUEUED_MAX_AGE_MS/);
    expect(loadConfig(workerConfigSchema, { QUEUED_MAX_AGE_MS: "86400000" }).QUEUED_MAX_AGE_MS).toBe(86_400_000);
  });

  it.each([
    ["LOCK_DURATION_MS", 1000],
    ["STALLED_INTERVAL_MS", 500],
    ["RUN_STALE_AFTER_MS", 1000],
    ["QUEUED_STALE_AFTER_MS", 1000],
  ])("refuses a %s below %d ms (heartbeats lapsing between renewals, scripts or sweeps without pause)", (name, min) => {
    expect(() => loadConfig(workerConfigSchema, { [name]: String(min - 1) })).toThrow(new RegExp(name));
    expect(loadConfig(workerConfigSchema, { [name]: String(min) })[name as "LOCK_DURATION_MS"]).toBe(min);
  });

  it("takes RUN_TIMEOUT_MS, an hour by default", () => {
    expect(loadConfig(workerConfigSchema, {}).RUN_TIMEOUT_MS).toBe(3_600_000);
    expect(() => loadConfig(workerConfigSchema, { RUN_TIMEOUT_MS: "0" })).toThrow(/RUN_TIMEOUT_MS/);
  });
});
