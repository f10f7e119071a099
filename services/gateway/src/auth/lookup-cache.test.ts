import { LookupCache } from "./lookup-cache";

// Fake timers (performance.now, the clock the cache reads, included): the cache's ages and the loads' durations are exact, however
// busy the machine running the tests.
beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Lets `ms` milliseconds pass, running what falls due meanwhile. */
const pass = (ms: number) => jest.advanceTimersByTimeAsync(ms);
/** `p` once it settled, time passing a millisecond at a time until then (a load takes fake time). */
async function settled<T>(p: Promise<T>): Promise<T> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 10_000 && !done; i++) await pass(1);
  return p;
}

/** A load that counts its calls and answers `value` (or fails with `error`) after `ms`. */
function slowLoad<T>(ms: number, value: () => T, error?: Error) {
  const load = jest.fn(async () => {
    await sleep(ms);
    if (error) throw error;
    return value();
  });
  return load;
}

describe("LookupCache", () => {
  it("keeps what was found while more than its size of distinct misses come and go", () => {
    const cache = new LookupCache<string>(60_000, 100);
    cache.set("found", "row");
    for (let i = 0; i < 1000; i++) cache.set(`miss-${i}`, null);
    expect(cache.get("found")).toBe("row");
    expect(cache.size).toEqual({ found: 1, missing: 100 });
    // The newest misses are kept, the oldest made room.
    expect(cache.get("miss-999")).toBeNull();
    expect(cache.get("miss-900")).toBeNull();
    expect(cache.get("miss-899")).toBeUndefined();
    expect(cache.get("miss-0")).toBeUndefined();
  });

  it("evicts the oldest entry first, counting a rewrite as new", () => {
    const cache = new LookupCache<number>(60_000, 3);
    cache.set("a", 1);
    cache.set("b", 2);
    cache.set("c", 3);
    cache.set("a", 10);
    cache.set("d", 4);
    expect(["a", "b", "c", "d"].map((k) => cache.get(k))).toEqual([10, undefined, 3, 4]);
  });

  it("keeps a key in one map only: a miss that is later found is a hit, and the reverse", () => {
    const cache = new LookupCache<number>(60_000, 10);
    cache.set("k", null);
    cache.set("k", 1);
    expect(cache.get("k")).toBe(1);
    cache.set("k", null);
    expect(cache.get("k")).toBeNull();
    expect(cache.size).toEqual({ found: 0, missing: 1 });
  });

  it("forgets entries after the TTL, and caches nothing with a TTL of 0", async () => {
    const short = new LookupCache<number>(20);
    short.set("k", 1);
    short.set("gone", null);
    await pass(40);
    expect(short.get("k")).toBeUndefined();
    expect(short.get("gone")).toBeUndefined();
    const none = new LookupCache<number>(0);
    none.set("k", 1);
    expect(none.get("k")).toBeUndefined();
  });

  it("shares one load among the callers that miss the same key while it runs", async () => {
    const cache = new LookupCache<number>(60_000);
    const load = slowLoad(30, () => 7);
    const other = slowLoad(30, () => 8);
    const answers = await settled(Promise.all([...Array.from({ length: 50 }, () => cache.getOrLoad("k", load)), cache.getOrLoad("other", other)]));
    expect(answers).toEqual([...Array(50).fill(7), 8]);
    expect(load).toHaveBeenCalledTimes(1);
    expect(other).toHaveBeenCalledTimes(1);
    expect(await cache.getOrLoad("k", load)).toBe(7);
    expect(load).toHaveBeenCalledTimes(1);
  });

  it("does not share a load that started more than the TTL ago: its answer may predate a change (a revocation)", async () => {
    const cache = new LookupCache<string>(100);
    let row = "valid";
    const load = jest.fn(async () => {
      const read = row;
      // The first load reads at once, and its answer takes 300 ms to arrive.
      await sleep(load.mock.calls.length === 1 ? 300 : 10);
      return read;
    });
    const first = cache.getOrLoad("k", load);
    await pass(10);
    row = "revoked";
    await pass(40);
    // Within the TTL of the first load's start: joins it.
    const joined = cache.getOrLoad("k", load);
    await pass(100);
    // Past it: loads again, and gets the database as it is now.
    const later = cache.getOrLoad("k", load);
    expect(await settled(Promise.all([first, joined, later]))).toEqual(["valid", "valid", "revoked"]);
    expect(load).toHaveBeenCalledTimes(2);
  });

  it("gives a failed load's error to every caller waiting for it and caches nothing", async () => {
    const cache = new LookupCache<number>(60_000);
    const failing = slowLoad(20, () => 1, new Error("database down"));
    const results = await settled(Promise.allSettled(Array.from({ length: 10 }, () => cache.getOrLoad("k", failing))));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill("rejected"));
    expect(failing).toHaveBeenCalledTimes(1);
    expect(cache.get("k")).toBeUndefined();
    const working = slowLoad(5, () => 2);
    expect(await settled(cache.getOrLoad("k", working))).toBe(2);
    expect(working).toHaveBeenCalledTimes(1);
  });

  it("answers an entry past half its TTL at once and reloads it in the background, once", async () => {
    const cache = new LookupCache<number>(300);
    let version = 1;
    const load = slowLoad(20, () => version);
    expect(await settled(cache.getOrLoad("k", load))).toBe(1);
    await pass(60);
    expect(await cache.getOrLoad("k", load)).toBe(1); // young: no reload
    expect(load).toHaveBeenCalledTimes(1);
    await pass(120); // past 150 ms
    version = 2;
    const during = await Promise.all(Array.from({ length: 5 }, () => cache.getOrLoad("k", load)));
    expect(during).toEqual(Array(5).fill(1)); // nobody waited for the reload
    expect(load).toHaveBeenCalledTimes(2);
    await pass(40);
    expect(cache.get("k")).toBe(2);
    await pass(200); // past the first entry's expiry (300 ms after its load started)
    expect(cache.get("k")).toBe(2);
    expect(load).toHaveBeenCalledTimes(2);
  });

  it("keeps a failed background reload from ending the entry before its TTL, and lets it expire then", async () => {
    const cache = new LookupCache<number>(200);
    expect(await settled(cache.getOrLoad("k", slowLoad(1, () => 1)))).toBe(1);
    await pass(120);
    const failing = slowLoad(5, () => 2, new Error("database down"));
    expect(await cache.getOrLoad("k", failing)).toBe(1);
    await pass(20);
    expect(failing).toHaveBeenCalledTimes(1);
    expect(cache.get("k")).toBe(1);
    await pass(80);
    expect(cache.get("k")).toBeUndefined();
  });

  it("counts the TTL from the start of the load, so a slow load's answer is trusted only for what remains", async () => {
    const cache = new LookupCache<number>(100);
    expect(await settled(cache.getOrLoad("slow", slowLoad(120, () => 1)))).toBe(1);
    expect(cache.get("slow")).toBeUndefined();
    expect(await settled(cache.getOrLoad("k", slowLoad(60, () => 2)))).toBe(2);
    expect(cache.get("k")).toBe(2);
    await pass(50);
    expect(cache.get("k")).toBeUndefined();
  });

  it("loads every time with a TTL of 0", async () => {
    const cache = new LookupCache<number>(0);
    const load = slowLoad(10, () => 3);
    expect(await settled(Promise.all([cache.getOrLoad("k", load), cache.getOrLoad("k", load)]))).toEqual([3, 3]);
    expect(load).toHaveBeenCalledTimes(2);
  });
});
