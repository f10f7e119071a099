import type { RunEvent } from "@agentrun/contracts";
import { withoutGaps } from "./stored-events";

const chunk = (seq: number) => ({ seq, type: "text_chunk", content: `c${seq}` }) as RunEvent;
const end = (seq: number) => ({ seq, type: "run_completed", run_id: "run_1", credits_used: 1 }) as RunEvent;

describe("withoutGaps", () => {
  it("keeps a run's events up to the first seq missing from both stores", () => {
    expect(withoutGaps([chunk(1), chunk(2), chunk(3), chunk(5)], 0).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(withoutGaps([chunk(4), chunk(6)], 3).map((e) => e.seq)).toEqual([4]);
    expect(withoutGaps([chunk(5)], 3)).toEqual([]);
  });

  it("keeps them all when none is missing", () => {
    expect(withoutGaps([chunk(3), chunk(4)], 2).map((e) => e.seq)).toEqual([3, 4]);
    expect(withoutGaps([], 7)).toEqual([]);
  });

  it("keeps them all once the run's end is stored: a seq missing then is lost for good", () => {
    expect(withoutGaps([chunk(1), chunk(3), end(4)], 0).map((e) => e.seq)).toEqual([1, 3, 4]);
  });
});
