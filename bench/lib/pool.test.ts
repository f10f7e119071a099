import { performance } from "node:perf_hooks";
import { sleep, steadyLoop } from "./pool";

/** A request that takes `ms` and reports which request it was and when it started and ended. */
function requests(ms: () => number) {
  let n = 0;
  let inFlight = 0;
  const starts: number[] = [];
  const ends: number[] = [];
  const t0 = performance.now();
  const fn = async () => {
    const id = n++;
    starts[id] = performance.now() - t0;
    inFlight++;
    await sleep(ms());
    inFlight--;
    ends[id] = performance.now() - t0;
    return { id, ok: id % 10 !== 9 };
  };
  return { fn, starts, ends, inFlight: () => inFlight, sent: () => n };
}

describe("steadyLoop", () => {
  it("drops the warm-up, measures the requests started in the window and keeps the load up until they end", async () => {
    const r = requests(() => 2 + Math.random() * 3);
    let inFlightAtClose = -1;
    let sentAtOpen = -1;
    const out = await steadyLoop({
      concurrency: 4,
      warmup: 12,
      maxCount: 40,
      durationMs: 60_000,
      rampMs: 0,
      signal: new AbortController().signal,
      fn: r.fn,
      ok: (x) => x.ok,
      onOpen: () => (sentAtOpen = r.sent()),
      onClose: () => (inFlightAtClose = r.inFlight()),
    });
    expect(sentAtOpen).toBe(12);
    expect(out.results).toHaveLength(40);
    expect(out.results.map((x) => x.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => 12 + i));
    // The other clients were still sending (cool-down) when the last measured request ended.
    expect(inFlightAtClose).toBeGreaterThanOrEqual(1);
    expect(r.sent()).toBeGreaterThan(52);
    // Completed in the window: the measured ones that succeeded, plus warm-up or cool-down
    // requests that ended inside it (at most one per other client on each side).
    const measuredOk = out.results.filter((x) => x.ok).length;
    expect(out.completedInWindow).toBeGreaterThanOrEqual(measuredOk);
    expect(out.completedInWindow).toBeLessThanOrEqual(measuredOk + 2 * 3 + 10);
    expect(out.elapsedMs).toBeGreaterThan(0);
    // The failures outside the window are kept apart from the figures, not lost: ids 9 (warm-up), and any of the cool-down.
    const unmeasured = out.unmeasuredFailures.map((x) => x.id);
    expect(unmeasured).toContain(9);
    expect(unmeasured.every((id) => id % 10 === 9 && (id < 12 || id >= 52))).toBe(true);
    expect(unmeasured.length).toBe(Array.from({ length: r.sent() }, (_, i) => i).filter((i) => i % 10 === 9 && (i < 12 || i >= 52)).length);
  });

  it("spreads the clients' first requests over the ramp", async () => {
    // Requests outlast the ramp, so the first four requests are the four clients' first ones.
    const r = requests(() => 200);
    await steadyLoop({ concurrency: 4, warmup: 0, maxCount: 4, durationMs: 60_000, rampMs: 120, signal: new AbortController().signal, fn: r.fn, ok: () => true });
    const firsts = r.starts.slice(0, 4);
    // Client i starts i × 30 ms in (timers never fire early; allow 1 ms of clock rounding).
    firsts.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(i * 30 - 1));
    // One after another. (Not a bound on the gaps: a busy machine delays the early starts most.)
    expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
  });

  it("with burst, starts the requests of every round together and the next round when the last has ended", async () => {
    // Durations from 1 to 20 ms: independent clients would be out of step within two rounds.
    const r = requests(() => 1 + Math.random() * 19);
    const out = await steadyLoop({ concurrency: 8, warmup: 16, maxCount: 80, durationMs: 60_000, rampMs: 0, burst: true, signal: new AbortController().signal, fn: r.fn, ok: (x) => x.ok });
    for (let k = 0; k < 12; k++) {
      const round = r.starts.slice(8 * k, 8 * k + 8);
      expect(Math.max(...round) - Math.min(...round)).toBeLessThan(3);
      if (k > 0) expect(Math.min(...round)).toBeGreaterThanOrEqual(Math.max(...r.ends.slice(8 * (k - 1), 8 * k)));
    }
    // Rounds 0-1 are the warm-up, 2-11 measured; the window closes with round 11's end.
    expect(out.results.map((x) => x.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 80 }, (_, i) => 16 + i));
    expect(r.sent()).toBe(96);
  });

  it("with burst, stops between rounds on abort", async () => {
    const r = requests(() => 5);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const out = await steadyLoop({ concurrency: 4, warmup: 0, maxCount: 1_000_000, durationMs: 60_000, rampMs: 0, burst: true, signal: ac.signal, fn: r.fn, ok: () => true });
    expect(r.sent() % 4).toBe(0);
    expect(out.results.length).toBe(r.sent());
    expect(out.elapsedMs).toBeGreaterThanOrEqual(40);
  });

  it("closes the window after durationMs when the count is not reached", async () => {
    const r = requests(() => 5);
    const t0 = performance.now();
    const out = await steadyLoop({ concurrency: 2, warmup: 2, maxCount: 1_000_000, durationMs: 100, rampMs: 0, signal: new AbortController().signal, fn: r.fn, ok: () => true });
    expect(out.elapsedMs).toBeGreaterThanOrEqual(100);
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(out.results.length).toBeGreaterThan(2);
    expect(out.results.length).toBeLessThan(1_000_000);
  });

  it("stops on abort and closes the window where it stands", async () => {
    const r = requests(() => 5);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    let closed = false;
    const out = await steadyLoop({ concurrency: 2, warmup: 0, maxCount: 1_000_000, durationMs: 60_000, rampMs: 0, signal: ac.signal, fn: r.fn, ok: () => true, onClose: () => (closed = true) });
    expect(closed).toBe(true);
    expect(out.elapsedMs).toBeGreaterThanOrEqual(40);
    expect(out.results.length).toBeGreaterThan(0);
  });

  it.each([false, true])("closes a window whose time ran out between two of its requests (burst: %s)", async (burst) => {
    // A clock that moves only when told: each request takes 10 ms, and 5 ms pass between one's
    // end and the next one's start (its accounting), so the window's 15 ms run out in that gap.
    let clock = 0;
    jest.spyOn(performance, "now").mockImplementation(() => clock);
    const ac = new AbortController();
    const guard = setTimeout(() => ac.abort(), 2000);
    let closes = 0;
    try {
      const out = await steadyLoop({
        concurrency: 1, warmup: 0, maxCount: 1_000_000, durationMs: 15, rampMs: 0, burst, signal: ac.signal,
        fn: async () => {
          await new Promise((r) => setImmediate(r));
          clock += 10;
          return true;
        },
        ok: () => ((clock += 5), true),
        onClose: () => closes++,
      });
      // Closed by the loop itself, where its one measured request ended, not by the guard's abort.
      expect([out.elapsedMs, out.results.length, closes, ac.signal.aborted]).toEqual([10, 1, 1, false]);
    } finally {
      clearTimeout(guard);
      jest.restoreAllMocks();
    }
  });
});
