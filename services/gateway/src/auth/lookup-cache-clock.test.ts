import { LookupCache } from "./lookup-cache";

// Only the wall clock is faked (setTimeout and performance stay real), so that it can be stepped
// as NTP or an operator would step it, while real time passes as it does.
beforeEach(() =>
  jest.useFakeTimers({
    doNotFake: ["hrtime", "nextTick", "performance", "queueMicrotask", "setImmediate", "clearImmediate", "setInterval", "clearInterval", "setTimeout", "clearTimeout"],
  }),
);
afterEach(() => jest.useRealTimers());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const HOUR = 3_600_000;

describe("LookupCache and the wall clock", () => {
  it("forgets entries after the TTL even when the wall clock is set back meanwhile", async () => {
    const cache = new LookupCache<string>(50);
    cache.set("k", "row");
    cache.set("gone", null);
    jest.setSystemTime(Date.now() - HOUR);
    await sleep(80);
    expect(cache.get("k")).toBeUndefined();
    expect(cache.get("gone")).toBeUndefined();
  });

  it("keeps entries for the TTL even when the wall clock jumps forward", async () => {
    const cache = new LookupCache<string>(60_000);
    cache.set("k", "row");
    jest.setSystemTime(Date.now() + HOUR);
    expect(cache.get("k")).toBe("row");
  });

  it("loads again once the TTL has passed, whatever the wall clock says", async () => {
    const cache = new LookupCache<string>(50);
    let row = "valid";
    const load = jest.fn(async () => row);
    expect(await cache.getOrLoad("k", load)).toBe("valid");
    row = "revoked";
    jest.setSystemTime(Date.now() - HOUR);
    await sleep(80);
    expect(await cache.getOrLoad("k", load)).toBe("revoked");
    expect(load).toHaveBeenCalledTimes(2);
  });
});
