import { ActiveRuns, type RunControl } from "./active-runs";

describe("ActiveRuns", () => {
  it("executes a run handed out twice once, and keeps it within reach of stop", async () => {
    const active = new ActiveRuns();
    const calls: RunControl[] = [];
    const execution = (control: RunControl) => {
      calls.push(control);
      return new Promise<void>((resolve) => control.signal.addEventListener("abort", () => resolve()));
    };
    const first = active.execute("run_a", execution);
    let secondDone = false;
    const second = active.execute("run_a", execution).then(() => (secondDone = true));
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1);
    expect(active.ids()).toEqual(["run_a"]);
    expect(secondDone).toBe(false);

    expect(active.stop("run_a", "cancel")).toBe(true);
    await Promise.all([first, second]);
    expect(calls[0]!.signal.reason).toBe("cancel");
    expect(active.size).toBe(0);
    expect(active.stop("run_a", "cancel")).toBe(false);
  });

  it("gives a run handed out again while it executes the execution's failure, so that its job is retried", async () => {
    const active = new ActiveRuns();
    let fail = (_: Error) => {};
    const first = active.execute("run_c", () => new Promise<void>((_, reject) => (fail = reject)));
    const again = active.execute("run_c", () => Promise.resolve());
    fail(new Error("database down"));
    await expect(first).rejects.toThrow("database down");
    await expect(again).rejects.toThrow("database down");
    expect(active.size).toBe(0);
  });

  it("starts a run handed over after stopAll already stopped, with the same reason", async () => {
    const active = new ActiveRuns();
    const running = active.execute("run_d", (control) => new Promise<void>((resolve) => control.signal.addEventListener("abort", () => resolve())));
    active.stopAll("shutdown");
    await running;
    let reason: unknown;
    await active.execute("run_e", async (control) => void (reason = control.signal.aborted ? control.signal.reason : "not stopped"));
    expect(reason).toBe("shutdown");
  });

  it("takes new runs until it is closed", () => {
    const active = new ActiveRuns();
    expect(active.accepting).toBe(true);
    active.close();
    expect(active.accepting).toBe(false);
  });

  it("forgets a run whose execution failed, and lets the failure through", async () => {
    const active = new ActiveRuns();
    await expect(active.execute("run_b", () => Promise.reject(new Error("database down")))).rejects.toThrow("database down");
    expect(active.size).toBe(0);
  });
});
