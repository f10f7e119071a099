import { ConfigError, loadConfig } from "@agentrun/config";
import express from "express";
import request from "supertest";
import { gatewayConfigSchema } from "./config";

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
  it.each(["RUN_WAIT_TIMEOUT_MS", "SSE_HEARTBEAT_MS", "REQUEST_TIMEOUT_MS", "SHUTDOWN_STREAM_GRACE_MS"])("refuses a %s a timer cannot wait (it would fire at once)", (name) => {
    expect(() => loadConfig(gatewayConfigSchema, { [name]: "2147483648" })).toThrow(ConfigError);
    expect(() => loadConfig(gatewayConfigSchema, { [name]: "2147483648" })).toThrow(new RegExp(name));
    expect(loadConfig(gatewayConfigSchema, { [name]: "2147483647" })[name as "SSE_HEARTBEAT_MS"]).toBe(2_147_483_647);
  });
});
