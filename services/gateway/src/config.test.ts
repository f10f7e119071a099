import { ConfigError, loadConfig, MAX_TIMER_MS } from "@agentrun/config";
import express from "express";
import request from "supertest";
import { gatewayConfigSchema, KEEP_ALIVE_TIMEOUT_MAX_MS, SSE_HEARTBEAT_MAX_MS } from "./config";

const trustProxy = (value?: string) => loadConfig(gatewayConfigSchema, value === undefined ? {} : { TRUST_PROXY: value }).TRUST_PROXY;

describe("TRUST_PROXY", () => {
  it("takes true, false, a hop count, and lists of addresses, subnets and names", () => {
    expect(trustProxy()).toBe(false);
    expect(trustProxy("true")).toBe(true);
    expect(trustProxy(" false ")).toBe(false);
    expect(trustProxy("2")).toBe(2);
    expect(trustProxy("loopback, 10.0.0.0/8,fd00::1")).toEqual(["loopback", "10.0.0.0/8", "fd00::1"]);
  });

  it.each(["garbage", "10.0.0.1,", "10.0.0.0/33", "yes please"])("refuses %j, naming the variable", (value) => {
    expect(() => trustProxy(value)).toThrow(ConfigError);
    expect(() => trustProxy(value)).toThrow(/^invalid environment: TRUST_PROXY: must be true, false, a hop count or a comma-separated list/);
  });

  it("is what Express trusts: a listed proxy's X-Forwarded-For gives req.ip, another's does not", async () => {
    const app = express()
      .set("trust proxy", trustProxy("127.0.0.1/8"))
      .get("/", (req, res) => void res.send(req.ip));
    await request(app).get("/").set("x-forwarded-for", "203.0.113.7").expect(200, "203.0.113.7");
    const untrusted = express()
      .set("trust proxy", trustProxy("10.0.0.0/8"))
      .get("/", (req, res) => void res.send(req.ip));
    await request(untrusted).get("/").set("x-forwarded-for", "203.0.113.7").expect(200, /127\.0\.0\.1$/);
  });
});

describe("durations", () => {
  it.each(["RUN_WAIT_TIMEOUT_MS", "REQUEST_TIMEOUT_MS", "SHUTDOWN_STREAM_GRACE_MS", "KEY_LAST_USED_FLUSH_MS"])("refuses a %s a timer cannot wait (it would fire at once)", (name) => {
    expect(() => loadConfig(gatewayConfigSchema, { [name]: "2147483648" })).toThrow(ConfigError);
    expect(() => loadConfig(gatewayConfigSchema, { [name]: "2147483648" })).toThrow(new RegExp(name));
    expect(loadConfig(gatewayConfigSchema, { [name]: "2147483647" })[name as "SSE_HEARTBEAT_MS"]).toBe(2_147_483_647);
  });

  it("refuses an SSE_HEARTBEAT_MS of which the widget's three missed pings (its silence limit) a timer cannot wait", () => {
    expect(() => loadConfig(gatewayConfigSchema, { SSE_HEARTBEAT_MS: "715827883" })).toThrow(
      "invalid environment: SSE_HEARTBEAT_MS: must be a duration in milliseconds, 1 to 715827882 (the widget waits three intervals for a ping, and a timer waits at most 2147483647 ms)",
    );
    expect(loadConfig(gatewayConfigSchema, { SSE_HEARTBEAT_MS: "715827882" }).SSE_HEARTBEAT_MS).toBe(SSE_HEARTBEAT_MAX_MS);
    expect(3 * SSE_HEARTBEAT_MAX_MS).toBeLessThanOrEqual(MAX_TIMER_MS);
  });

  it("refuses a KEEP_ALIVE_TIMEOUT_MS that Node's idle-connection timer (1 s past it) cannot wait", () => {
    expect(() => loadConfig(gatewayConfigSchema, { KEEP_ALIVE_TIMEOUT_MS: "2147482648" })).toThrow(/^invalid environment: KEEP_ALIVE_TIMEOUT_MS: must be a duration in milliseconds, 1000 to 2147482647 /);
    expect(loadConfig(gatewayConfigSchema, { KEEP_ALIVE_TIMEOUT_MS: "2147482647" }).KEEP_ALIVE_TIMEOUT_MS).toBe(KEEP_ALIVE_TIMEOUT_MAX_MS);
  });

  it.each([
    ["SSE_HEARTBEAT_MS", "0x10"],
    ["RUN_WAIT_TIMEOUT_MS", "0b101"],
    ["REQUEST_TIMEOUT_MS", "1e3"],
    ["AUTH_CACHE_TTL_MS", "9e2"],
    ["SHUTDOWN_STREAM_GRACE_MS", "2000.0"],
    ["DB_QUERY_TIMEOUT_MS", "0x1000"],
  ])("refuses %s=%s, which is no number in decimal digits (it was read as another value)", (name, value) => {
    expect(() => loadConfig(gatewayConfigSchema, { [name]: value })).toThrow(new RegExp(`^invalid environment: ${name}: must be a duration in milliseconds, `));
  });
});

describe("counts and sizes", () => {
  it.each(["BODY_LIMIT_BYTES", "DB_POOL_SIZE", "AUTH_FAILURE_LIMIT", "WIDGET_TOKEN_TTL_S", "WIDGET_RPM_PER_KEY", "WIDGET_RPM_PER_IP"])("%s takes decimal digits only, 1 or more", (name) => {
    for (const value of ["0x10", "0b101", "1e3", "10.0", "0", "-5"]) expect(() => loadConfig(gatewayConfigSchema, { [name]: value })).toThrow(`invalid environment: ${name}: must be a whole number, 1 or more`);
    expect(loadConfig(gatewayConfigSchema, { [name]: "16" })[name as "DB_POOL_SIZE"]).toBe(16);
  });

  it("keeps every default", () => {
    expect(loadConfig(gatewayConfigSchema, {})).toMatchObject({ SSE_HEARTBEAT_MS: 14_000, AUTH_CACHE_TTL_MS: 900, BODY_LIMIT_BYTES: 1024 * 1024, KEEP_ALIVE_TIMEOUT_MS: 65_000, DB_POOL_SIZE: 10, AUTH_FAILURE_LIMIT: 30, WIDGET_TOKEN_TTL_S: 86_400, WIDGET_RPM_PER_KEY: 120, WIDGET_RPM_PER_IP: 20 });
  });
});
