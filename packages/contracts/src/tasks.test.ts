import { readFileSync } from "node:fs";
import { join } from "node:path";
import { idempotencyKeySchema } from "./tasks";

describe("idempotencyKeySchema", () => {
  it.each([
    ["one character", "a"],
    ["punctuation", "order-42/retry:1!~"],
    ["255 characters", "k".repeat(255)],
  ])("accepts %s", (_name, key) => {
    expect(idempotencyKeySchema.safeParse(key).success).toBe(true);
  });

  it.each([
    ["an empty key", ""],
    ["a space", "has space"],
    ["a tab", "tab\there"],
    ["a non-ASCII character", "caf\u00e9"],
    ["256 characters", "k".repeat(256)],
  ])("refuses %s", (_name, key) => {
    expect(idempotencyKeySchema.safeParse(key).success).toBe(false);
  });

  it("is the rule docs/api.md states", () => {
    const doc = readFileSync(join(__dirname, "../../../docs/api.md"), "utf8").replace(/\s+/g, " ");
    expect(doc).toContain("`Idempotency-Key` (1–255 printable ASCII characters, without spaces)");
  });
});
