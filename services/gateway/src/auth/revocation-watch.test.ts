import { RevocationWatch, type KeyChecker } from "./revocation-watch";

/** Keys as a checker sees them: revoked ones, and ones whose lookup fails. */
class Keys implements KeyChecker {
  readonly revoked = new Set<string>();
  readonly failing = new Set<string>();
  readonly checks: string[] = [];
  async stillValid(id: string): Promise<boolean> {
    this.checks.push(id);
    if (this.failing.has(id)) throw new Error("database out of reach");
    return !this.revoked.has(id);
  }
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until `cond` holds (a busy machine may delay the watch's timer). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await tick(10);
  expect(cond()).toBe(true);
}

describe("RevocationWatch", () => {
  it("tells every answer of a revoked key once, checking each key once per interval", async () => {
    const keys = new Keys();
    const watch = new RevocationWatch(10);
    const told: string[] = [];
    watch.watch({ id: "a", checker: keys }, () => told.push("a1"));
    watch.watch({ id: "a", checker: keys }, () => told.push("a2"));
    watch.watch({ id: "b", checker: keys }, () => told.push("b"));
    await tick(35);
    expect(told).toEqual([]);
    // One check per key and interval, not per answer.
    expect(keys.checks.filter((k) => k === "a").length).toBe(keys.checks.filter((k) => k === "b").length);
    keys.revoked.add("a");
    await until(() => told.length === 2);
    expect(told.sort()).toEqual(["a1", "a2"]);
    expect(watch.size).toBe(1);
    await tick(35);
    expect(told).toHaveLength(2);
    keys.revoked.add("b");
    await until(() => told.includes("b"));
    expect(watch.size).toBe(0);
  });

  it("keeps answers open while the check fails, and forgets answers that stopped watching", async () => {
    const keys = new Keys();
    const watch = new RevocationWatch(10);
    let told = 0;
    keys.failing.add("a");
    const stop = watch.watch({ id: "a", checker: keys }, () => told++);
    await until(() => keys.checks.length >= 3);
    expect(told).toBe(0);
    stop();
    expect(watch.size).toBe(0);
    keys.failing.clear();
    keys.revoked.add("a");
    const checked = keys.checks.length;
    await tick(35);
    // Nothing watched: no check, nobody told.
    expect({ told, checks: keys.checks.length }).toEqual({ told: 0, checks: checked });
  });
});
