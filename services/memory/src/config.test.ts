import { DEV_INTERNAL_TOKEN, isPublishedSecret, loadConfig } from "@agentrun/config";
import { memoryConfigSchema, startupWarnings } from "./config";

describe("memory service config", () => {
  it("knows the default INTERNAL_TOKEN and the change-me placeholders are published", () => {
    const defaults = loadConfig(memoryConfigSchema, {});
    expect(isPublishedSecret(defaults.INTERNAL_TOKEN, DEV_INTERNAL_TOKEN)).toBe(true);
    expect(isPublishedSecret("change-me-internal-token", DEV_INTERNAL_TOKEN)).toBe(true);
    expect(isPublishedSecret("a-long-random-value-0123456789", DEV_INTERNAL_TOKEN)).toBe(false);
  });

  it("warns at start-up in production when INTERNAL_TOKEN is published, and only then", () => {
    const warnings = (env: Record<string, string>) => startupWarnings(loadConfig(memoryConfigSchema, env));
    expect(warnings({ NODE_ENV: "production" })).toEqual([expect.stringMatching(/^INTERNAL_TOKEN is a published default/)]);
    expect(warnings({ NODE_ENV: "production", INTERNAL_TOKEN: "change-me-internal-token" })).toHaveLength(1);
    expect(warnings({ NODE_ENV: "production", INTERNAL_TOKEN: "a-long-random-value-0123456789" })).toEqual([]);
    expect(warnings({})).toEqual([]);
    expect(warnings({ NODE_ENV: "development" })).toEqual([]);
  });
});
