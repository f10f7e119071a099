import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eventsQuerySchema, idempotencyKeySchema, taskListQuerySchema } from "./tasks";

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

describe("integer query parameters", () => {
  const after = eventsQuerySchema.shape.after;
  it.each([
    ["absent", undefined, 0],
    ["zero", "0", 0],
    ["the largest seq", "1000000000", 1_000_000_000],
  ])("take %s", (_name, value, parsed) => {
    expect(after.parse(value)).toBe(parsed);
  });

  it.each([
    ["past the largest seq", "1000000001", /Too big/],
    ["far past any number", "99999999999999999999", /Too big/],
    ["negative", "-1", /Too small/],
    ["not a number", "1.5", /must be an integer/],
  ])("refuse a value %s with one message", (_name, value, message) => {
    const issues = after.safeParse(value).error?.issues ?? [];
    expect(issues.map((i) => i.message)).toEqual([expect.stringMatching(message)]);
  });
});

describe("the task list's offset", () => {
  const offset = taskListQuerySchema.shape.offset;
  it("takes any integer from 0, one past any table as past every row", () => {
    expect([undefined, "0", "25", "1000000000"].map((v) => offset.parse(v))).toEqual([0, 0, 25, 1_000_000_000]);
    expect(offset.parse("1000000001")).toBe(1_000_000_000);
    expect(offset.parse("9".repeat(400))).toBe(1_000_000_000);
  });

  it.each(["-1", "1.5", "1e3", "", "abc"])("refuses %j", (value) => {
    expect(offset.safeParse(value).success).toBe(false);
  });
});
