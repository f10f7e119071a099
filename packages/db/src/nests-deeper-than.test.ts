import { nestsDeeperThan } from "./storable";

const MAX_JSON_DEPTH = 32;

const depthOf = (text: string, max = MAX_JSON_DEPTH) => nestsDeeperThan(Buffer.from(text), max);

describe("nestsDeeperThan", () => {
  it("counts the nesting of arrays and objects", () => {
    expect(depthOf('{"a":[{"b":[1]}]}', 4)).toBe(false);
    expect(depthOf('{"a":[{"b":[[1]]}]}', 4)).toBe(true);
    expect(depthOf("[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH))).toBe(false);
    expect(depthOf("[".repeat(MAX_JSON_DEPTH + 1) + "]".repeat(MAX_JSON_DEPTH + 1))).toBe(true);
  });

  it("goes back up when arrays and objects close: siblings do not add up", () => {
    expect(depthOf(`[${"[[]],".repeat(100)}[]]`, 3)).toBe(false);
  });

  it("ignores brackets inside strings, escaped quotes included", () => {
    expect(depthOf(JSON.stringify({ s: "[[[[[[{{{{{{" }), 2)).toBe(false);
    expect(depthOf(JSON.stringify({ s: 'say "[[[[" \\ and [[[[' }), 2)).toBe(false);
    expect(depthOf(JSON.stringify({ s: "\\", t: [[[[1]]]] }), 3)).toBe(true);
  });
});
