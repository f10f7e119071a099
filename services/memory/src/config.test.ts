import { DEV_INTERNAL_TOKEN, isPublishedSecret, loadConfig } from "@agentrun/config";
import { memoryConfigSchema, startupWarnings } from "./config";

describe("memory service config", () => {
  it("knows the default INTERNAL_TOKEN and the change-me placeholders are published", () => {
    const defaults = loadConfig(memoryConfigSchema, {});
    expect(isPublishedSecret(defaults.INTERNAL_TOKEN, DEV_INTERNAL_TOKEN)).toBe(true);
    expect(isPublishedSecret("change-me-internal-token", DEV_INTERNAL_TOKEN)).toBe(true);
    expect(isPublishedSecret("a-long-random-value-0123456789", DEV_INTERNAL_TOKEN)).toBe(false);
  });

  it("warns at start-up when INTERNAL_TOKEN is published, in production or listening beyond loopback", () => {
    const warnings = (env: Record<string, string>) => startupWarnings(loadConfig(memoryConfigSchema, env));
    expect(warnings({ NODE_ENV: "production" })).toEqual([expect.stringMatching(/^INTERNAL_TOKEN is a published default/)]);
    expect(warnings({ NODE_ENV: "production", MEMORY_HOST: "127.0.0.1" })).toHaveLength(1);
    expect(warnings({ NODE_ENV: "production", INTERNAL_TOKEN: "change-me-internal-token" })).toHaveLength(1);
    expect(warnings({ NODE_ENV: "production", INTERNAL_TOKEN: "a-long-random-value-0123456789" })).toEqual([]);
    // Not in production: only where others can reach it (every interface unless MEMORY_HOST says otherwise).
    expect(warnings({})).toHaveLength(1);
    expect(warnings({ MEMORY_HOST: "0.0.0.0" })).toHaveLength(1);
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) expect(warnings({ NODE_ENV: "development", MEMORY_HOST: host })).toEqual([]);
    expect(warnings({ MEMORY_HOST: "127.0.0.1", INTERNAL_TOKEN: "a-long-random-value-0123456789" })).toEqual([]);
  });

  it("takes DB_POOL_SIZE and DB_QUERY_TIMEOUT_MS in decimal digits only (not read as other values)", () => {
    expect(loadConfig(memoryConfigSchema, {})).toMatchObject({ DB_POOL_SIZE: 10, DB_QUERY_TIMEOUT_MS: 5000 });
    expect(loadConfig(memoryConfigSchema, { DB_POOL_SIZE: "4", DB_QUERY_TIMEOUT_MS: "2000" })).toMatchObject({ DB_POOL_SIZE: 4, DB_QUERY_TIMEOUT_MS: 2000 });
    for (const value of ["0x10", "0b101", "1e1", "4.0"]) {
      expect(() => loadConfig(memoryConfigSchema, { DB_POOL_SIZE: value })).toThrow("invalid environment: DB_POOL_SIZE: must be a whole number, 1 or more");
      expect(() => loadConfig(memoryConfigSchema, { DB_QUERY_TIMEOUT_MS: value.replace("1e1", "1e3") })).toThrow("invalid environment: DB_QUERY_TIMEOUT_MS: must be a duration in milliseconds, 100 to 600000");
    }
  });
});
