import { BASE62_ALPHABET, randomBase62 } from "./base62";

describe("randomBase62", () => {
  it("returns exactly the requested number of base62 characters", () => {
    for (const n of [0, 1, 7, 24, 32, 500]) {
      const s = randomBase62(n);
      expect(s).toHaveLength(n);
      expect(s).toMatch(/^[0-9A-Za-z]*$/);
    }
  });

  it("rejects invalid lengths", () => {
    expect(() => randomBase62(-1)).toThrow(RangeError);
    expect(() => randomBase62(1.5)).toThrow(RangeError);
  });

  it("uses every character with roughly equal frequency (no modulo bias)", () => {
    const sample = randomBase62(62 * 2000);
    const counts = new Map<string, number>();
    for (const c of sample) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // Expected 2000 each (sd ≈ 44); a modulo-biased generator gives the first 8 about 2580.
    for (const c of BASE62_ALPHABET) {
      expect(counts.get(c)).toBeGreaterThan(1750);
      expect(counts.get(c)).toBeLessThan(2250);
    }
  });
});
