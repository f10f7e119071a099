import { every } from "./every";

// Fake timers: the intervals and the calls' durations are exact, however busy the machine.
beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Lets `ms` milliseconds pass, running what falls due meanwhile. */
const pass = (ms: number) => jest.advanceTimersByTimeAsync(ms);

it("skips the ticks that find the last call still in progress, so calls never overlap", async () => {
  let inProgress = 0;
  let most = 0;
  const starts: number[] = [];
  const t0 = Date.now();
  // Each call takes 100 ms: five intervals.
  const stop = every(20, async () => {
    starts.push(Date.now() - t0);
    most = Math.max(most, ++inProgress);
    await sleep(100);
    inProgress--;
  });
  await pass(450);
  stop();
  expect(most).toBe(1);
  // The first tick at 20 ms; each next one at the first tick after the call ended.
  expect(starts).toEqual([20, 140, 260, 380]);
  await pass(300);
  expect(starts).toHaveLength(4);
});

it("calls at once with `now`, then on each tick once the call is done", async () => {
  let calls = 0;
  const stop = every(50, async () => void calls++, { now: true });
  expect(calls).toBe(1);
  await pass(180);
  stop();
  expect(calls).toBe(4);
});

it("goes on after a call that rejects", async () => {
  let calls = 0;
  const stop = every(10, async () => {
    calls++;
    throw new Error("sweep failed");
  });
  await pass(35);
  stop();
  expect(calls).toBe(3);
});
