import { readdirSync, readFileSync } from "node:fs";
import { startStack } from "./stack";
import { eventually } from "./waiting";

/** The processes whose environment holds `marker` (as STACK_TEST_MARKER). */
function processesMarked(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(`STACK_TEST_MARKER=${marker}`)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

describe("startStack", () => {
  it("stops every process it started when its signal aborts during start-up, and rejects with the reason", async () => {
    const marker = `abort-${process.pid}-${Date.now()}`;
    const controller = new AbortController();
    const starting = startStack({ workers: 2, env: { STACK_TEST_MARKER: marker }, signal: controller.signal });
    try {
      // The model, the memory service and the gateway are starting.
      await eventually(async () => processesMarked(marker).length >= 3, { timeoutMs: 10_000, intervalMs: 20 });
      controller.abort(new Error("interrupted"));
      await expect(starting).rejects.toThrow("interrupted");
      expect(processesMarked(marker)).toEqual([]);
    } finally {
      await (await starting.catch(() => null))?.stop();
    }
  }, 60_000);
});
