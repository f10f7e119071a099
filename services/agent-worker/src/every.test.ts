import { every } from "./every";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("skips the ticks that find the last call still in progress, so calls never overlap", async () => {
  let inProgress = 0;
  let most = 0;
  let calls = 0;
  // Each call takes five intervals.
  const stop = every(20, async () => {
    calls++;
    most = Math.max(most, ++inProgress);
    await sleep(100);
    inProgress--;
  });
  await sleep(450);
  stop();
  expect(most).toBe(1);
  expect(calls).toBeGreaterThanOrEqual(2);
  expect(calls).toBeLessThanOrEqual(5);
  const before = calls;
  await sleep(150);
  expect(calls).toBe(before);
});

it("calls at once with `now`, then on each tick once the call is done", async () => {
  let calls = 0;
  const stop = every(50, async () => void calls++, { now: true });
  expect(calls).toBe(1);
  await sleep(180);
  stop();
  expect(calls).toBeGreaterThanOrEqual(3);
});
