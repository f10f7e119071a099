import { ConfigError, loadConfig } from "@agentrun/config";
import { workerConfigSchema } from "./config";

describe("worker config", () => {
  it.each(["MEMORY_URL", "SCRIPTED_MODEL_URL", "OPENAI_BASE_URL"])("refuses %s without an http(s) scheme, naming it", (name) => {
    for (const value of ["localhost:3002", "127.0.0.1:3002/v1", "ftp://127.0.0.1/", "http:/x"]) {
      expect(() => loadConfig(workerConfigSchema, { [name]: value })).toThrow(ConfigError);
      expect(() => loadConfig(workerConfigSchema, { [name]: value })).toThrow(new RegExp(name));
    }
    expect(loadConfig(workerConfigSchema, { [name]: "https://models.example/v1" })[name as "MEMORY_URL"]).toBe("https://models.example/v1");
  });

  it.each(["MODEL_TIMEOUT_MS", "MODEL_IDLE_TIMEOUT_MS", "HTTP_TOOL_TIMEOUT_MS", "SHUTDOWN_GRACE_MS"])("refuses a %s a timer cannot wait (it would fire at once)", (name) => {
    expect(() => loadConfig(workerConfigSchema, { [name]: "3000000000" })).toThrow(new RegExp(name));
    expect(loadConfig(workerConfigSchema, { [name]: "2147483647" })[name as "MODEL_TIMEOUT_MS"]).toBe(2_147_483_647);
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
