import { createHash } from "node:crypto";
import { generateApiKey, generateWidgetKey, hashApiKey, looksLikeApiKey, looksLikeWidgetKey } from "./keys";

describe("generateApiKey", () => {
  it("returns an ar_live_ key with 32 base62 characters, its 12-character prefix and its sha256", () => {
    const { apiKey, prefix, keyHash } = generateApiKey();
    expect(apiKey).toMatch(/^ar_live_[0-9A-Za-z]{32}$/);
    expect(prefix).toBe(apiKey.slice(0, 12));
    expect(prefix).toHaveLength(12);
    expect(keyHash).toBe(createHash("sha256").update(apiKey).digest("hex"));
    expect(looksLikeApiKey(apiKey)).toBe(true);
  });

  it("never repeats", () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateApiKey().apiKey));
    expect(keys.size).toBe(1000);
  });
});

describe("hashApiKey", () => {
  it("is lower-case hex sha256", () => {
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("generateWidgetKey", () => {
  it("returns pk_ and 24 base62 characters", () => {
    const key = generateWidgetKey();
    expect(key).toMatch(/^pk_[0-9A-Za-z]{24}$/);
    expect(looksLikeWidgetKey(key)).toBe(true);
    expect(looksLikeApiKey(key)).toBe(false);
  });
});

describe("looksLikeApiKey", () => {
  it.each([
    ["", false],
    ["ar_live_", false],
    [`ar_live_${"a".repeat(31)}`, false],
    [`ar_live_${"a".repeat(33)}`, false],
    [`ar_test_${"a".repeat(32)}`, false],
    [`ar_live_${"a".repeat(31)}-`, false],
    [` ar_live_${"a".repeat(32)}`, false],
    [`ar_live_${"aZ09".repeat(8)}`, true],
  ])("%j → %s", (input, expected) => {
    expect(looksLikeApiKey(input)).toBe(expected);
  });

  it("rejects non-strings", () => {
    expect(looksLikeApiKey(undefined)).toBe(false);
    expect(looksLikeApiKey(42)).toBe(false);
  });
});
