import { plansUseIndexes } from "./lists-data";

describe("plansUseIndexes", () => {
  const custom = "Limit\n  ->  Index Scan using tasks_agent_id_created_at_id_idx on tasks";
  it("passes plans that read tasks and messages through indexes", () => {
    expect(plansUseIndexes(`${custom}\n-- generic plan:\n${custom}`)).toBe(true);
  });
  it("fails a sequential scan of a list table in either plan", () => {
    expect(plansUseIndexes(`${custom}\n-- generic plan:\nSeq Scan on tasks`)).toBe(false);
    expect(plansUseIndexes("Seq Scan on messages")).toBe(false);
  });
  it("fails when one of the plans could not be read, though the other uses indexes", () => {
    expect(plansUseIndexes(`${custom}\n-- generic plan:\nEXPLAIN failed: could not determine data type of parameter $3`)).toBe(false);
  });
});
