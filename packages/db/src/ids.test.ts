import { newId } from "./ids";

describe("newId", () => {
  it("prefixes the id and sorts in creation order", async () => {
    const a = newId("task");
    await new Promise((r) => setTimeout(r, 2));
    const b = newId("task");
    expect(a).toMatch(/^task_[0-9a-f]{32}$/);
    expect(a < b).toBe(true);
    expect(new Set(Array.from({ length: 1000 }, () => newId("run"))).size).toBe(1000);
  });
});
