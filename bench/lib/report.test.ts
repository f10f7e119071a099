import { judged, printTable, type ScenarioResult } from "./report";

describe("judged", () => {
  it("passes a figure within its target and says whether the baseline is within it too", () => {
    expect(judged({ name: "p99", unit: "ms", value: 8, baseline: 2 }, 10)).toEqual({ name: "p99", unit: "ms", value: 8, baseline: 2, ratio: 4, target: "≤ 10", pass: true });
    const bound = { baselineBound: true };
    expect(judged({ name: "p99", unit: "ms", value: 30, baseline: 14 }, 10, false, bound)).toMatchObject({ pass: false, baselineMisses: true });
    expect(judged({ name: "p99", unit: "ms", value: 30, baseline: 9 }, 10, false, bound)).not.toHaveProperty("baselineMisses");
    expect(judged({ name: "runs/s", unit: "runs/s", value: 172, baseline: 1625 }, 400, true, bound)).toMatchObject({ pass: false });
    expect(judged({ name: "runs/s", unit: "runs/s", value: 172, baseline: 1625 }, 400, true, bound)).not.toHaveProperty("baselineMisses");
    expect(judged({ name: "runs/s", unit: "runs/s", value: 172, baseline: 300 }, 400, true, bound)).toMatchObject({ baselineMisses: true });
    // A baseline that is no bound of the figure (the model's first token against run_started) says nothing.
    expect(judged({ name: "first event p50", unit: "ms", value: 261, baseline: 131 }, 100)).not.toHaveProperty("baselineMisses");
  });

  it("marks in the table, and names below it, a miss the baseline shares", () => {
    const results: ScenarioResult[] = [
      { name: "lists-1m", description: "", details: {}, durationS: 1, metrics: [judged({ name: "a p99", unit: "ms", value: 30, baseline: 14 }, 10, false, { baselineBound: true }), judged({ name: "b p99", unit: "ms", value: 30, baseline: 3 }, 10, false, { baselineBound: true })] },
    ];
    const lines: string[] = [];
    printTable(results, (s) => lines.push(s));
    expect(lines.find((l) => l.includes("a p99"))).toMatch(/MISS \(baseline too\)\s*$/);
    expect(lines.find((l) => l.includes("b p99"))).toMatch(/MISS\s*$/);
    expect(lines.at(-1)).toBe("  the baseline alone misses the target (the machine is too slow for it, whatever the service does): lists-1m / a p99");
  });
});
