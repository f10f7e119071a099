import { clockTicks, machineCpuOf } from "./procfs";

describe("machineCpuOf", () => {
  it("counts neither idle, iowait nor steal as busy, and guest time once (it is in user and nice)", () => {
    // user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks.
    const { busy, total } = machineCpuOf("cpu  100 10 50 800 40 5 5 30 20 0");
    expect([Math.round(busy * clockTicks()), Math.round(total * clockTicks())]).toEqual([170, 1040]);
  });

  it("reads a line without the later fields (older kernels)", () => {
    const { busy, total } = machineCpuOf("cpu  100 0 100 800 0 0 0");
    expect([Math.round(busy * clockTicks()), Math.round(total * clockTicks())]).toEqual([200, 1000]);
  });
});
