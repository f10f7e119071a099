import { newId } from "@agentrun/db";
import { memoryIdTime, newMemoryId } from "./memory-id";

describe("memory ids", () => {
  it("gives a new entry the time its id carries as its creation time", () => {
    const before = Date.now();
    const { id, createdAt } = newMemoryId();
    expect(id).toMatch(/^mem_[0-9a-f]{32}$/);
    expect(memoryIdTime(id)).toEqual(createdAt);
    expect(createdAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(createdAt.getTime()).toBeLessThanOrEqual(Date.now() + 1);
  });

  it("reads the time from the UUIDv7's first 48 bits", () => {
    expect(memoryIdTime("mem_019b7a2c8e00700080000000000000aa")).toEqual(new Date(0x019b7a2c8e00));
  });

  it.each([
    ["another kind of id", newId("task")],
    ["no hex body", "mem_missing"],
    ["a body that is not a UUIDv7", "mem_00000000000000000000000000000000"],
    ["upper-case hex", "mem_019B7A2C8E00700080000000000000AA"],
    ["a body one digit short", "mem_019b7a2c8e00700080000000000000a"],
    ["dashes", "mem_019b7a2c-8e00-7000-8000-0000000000aa"],
  ])("knows %s is not a memory id", (_name, id) => {
    expect(memoryIdTime(id)).toBeUndefined();
  });
});
