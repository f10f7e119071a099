import { ConfigError, loadConfig, MAX_TIMER_MS } from "@agentrun/config";
import { z } from "zod";
import { callerStopGraceMs, workersSetting } from "../../../scripts/stack-supervisor";

// `npm start` and `npm run dev` kill the gateway and the workers at a deadline set with a timer:
// one past MAX_TIMER_MS fires at once, which SIGKILLed both as soon as SIGTERM arrived.

describe("callerStopGraceMs", () => {
  it("is 10 s past SHUTDOWN_GRACE_MS, 20 s at least", () => {
    expect(callerStopGraceMs({})).toBe(20_000);
    expect(callerStopGraceMs({ SHUTDOWN_GRACE_MS: "25000" })).toBe(35_000);
    expect(callerStopGraceMs({ SHUTDOWN_GRACE_MS: "1000" })).toBe(20_000);
  });

  it("is never longer than a timer waits: the worker's largest grace gets exactly that", () => {
    expect(callerStopGraceMs({ SHUTDOWN_GRACE_MS: "2147473647" })).toBe(MAX_TIMER_MS);
    // Larger values the worker refuses (it exits at start-up); the deadline still fits a timer.
    for (const grace of ["2147473648", "2147483647", "99999999999"]) expect(callerStopGraceMs({ SHUTDOWN_GRACE_MS: grace })).toBe(MAX_TIMER_MS);
  });
});

describe("WORKERS", () => {
  const workers = (value: string) => loadConfig(z.object({ WORKERS: workersSetting }), { WORKERS: value }).WORKERS;

  it("takes 1 to 16 in decimal digits, 1 by default", () => {
    expect(loadConfig(z.object({ WORKERS: workersSetting }), {}).WORKERS).toBe(1);
    expect(workers(" 16 ")).toBe(16);
  });

  it.each(["0x2", "0b10", "2e0", "2.0", "0", "17"])("refuses %j", (value) => {
    expect(() => workers(value)).toThrow(ConfigError);
    expect(() => workers(value)).toThrow("invalid environment: WORKERS: must be a whole number, 1 to 16");
  });
});
