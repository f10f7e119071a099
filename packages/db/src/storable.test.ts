import { storableJson, storableJsonText, storableText } from "./storable";

describe("storableText / storableJson", () => {
  it("replaces U+0000 with U+FFFD and leaves other text alone", () => {
    expect(storableText("a\0b\0")).toBe("a\uFFFDb\uFFFD");
    expect(storableText("\\u0000 is text")).toBe("\\u0000 is text");
  });

  it("serializes as jsonb can store, cleaning only values whose JSON holds a suspect escape", () => {
    expect(storableJsonText({ a: "x\ud800", b: ["\u0000"] })).toBe('{"a":"x\uFFFD","b":["\uFFFD"]}');
    expect(storableJsonText({ text: "pair \ud83d\ude00", literal: "\\u0000 and \\ud800" })).toBe(JSON.stringify({ text: "pair \ud83d\ude00", literal: "\\u0000 and \\ud800" }));
  });

  it("replaces lone surrogates, which jsonb refuses, and keeps pairs", () => {
    expect(storableText("a\ud800b\udc00")).toBe("a\uFFFDb\uFFFD");
    expect(storableText("emoji \ud83d\ude00")).toBe("emoji \ud83d\ude00");
    expect(storableJson({ "k\udfff": ["\ud800"] })).toEqual({ "k\uFFFD": ["\uFFFD"] });
  });

  it("cleans every string and key of a JSON value, and returns the same value when there is nothing to clean", () => {
    const dirty = { "k\0": ["x\0", 1, null, { deep: "y\0" }], ok: true };
    expect(storableJson(dirty)).toEqual({ "k\uFFFD": ["x\uFFFD", 1, null, { deep: "y\uFFFD" }], ok: true });
    expect(dirty["k\0"]![0]).toBe("x\0");
    const clean = { a: ["b", { c: 1 }] };
    expect(storableJson(clean)).toBe(clean);
    expect(JSON.stringify(storableJson(dirty))).not.toContain("\\u0000");
  });
});
