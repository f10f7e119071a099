import { parseArgs, warmupSeconds } from "./args";

describe("bench arguments", () => {
  it("warms a fresh stack up for 20 s, 5 s with --quick, or as --warmup says (0: not at all)", () => {
    expect(warmupSeconds(parseArgs([]))).toBe(20);
    expect(warmupSeconds(parseArgs(["--quick"]))).toBe(5);
    expect(warmupSeconds(parseArgs(["--quick", "--warmup=45"]))).toBe(45);
    expect(warmupSeconds(parseArgs(["--warmup=0"]))).toBe(0);
  });

  it("refuses a warm-up that is not a whole number of seconds from 0 to 600", () => {
    for (const bad of ["--warmup", "--warmup=-1", "--warmup=1.5", "--warmup=601", "--warmup=ten"]) {
      expect(() => parseArgs([bad])).toThrow(/--warmup must be an integer from 0 to 600/);
    }
  });
});
