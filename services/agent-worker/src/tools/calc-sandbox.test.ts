import { randomUUID } from "node:crypto";
import { spawn } from "node:child_process";
import path from "node:path";
import { runInThisContext } from "node:vm";
import { CalcFailure, CalcSandbox, type CalcLimits } from "./calc-sandbox";
import * as calcProcess from "./calc-process";
import { alive, calcProcesses } from "./calc-processes.fixture";

/** Computes for far longer than any time limit here. */
const SLOW = "f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(40)";
const LIMITS: CalcLimits = { timeoutMs: 1000, maxWaitMs: 10_000, maxHeapMb: 64, threads: 2 };

const running = () => new AbortController().signal;

/** How `promise` settled, and when (ms since `t0`). */
async function outcome<T>(promise: Promise<T>, t0: number): Promise<{ at: number; value?: T; error?: unknown }> {
  try {
    const value = await promise;
    return { at: Date.now() - t0, value };
  } catch (error) {
    return { at: Date.now() - t0, error };
  }
}

const reason = (o: { error?: unknown }) => (o.error instanceof CalcFailure ? o.error.reason : o.error);

/** The processes `sandbox` started to warm up (those of earlier tests' sandboxes left out). */
async function startedBy(sandbox: CalcSandbox) {
  const before = new Set(calcProcesses().map((p) => p.pid));
  await sandbox.warm();
  const started = calcProcesses().filter((p) => !before.has(p.pid));
  expect(started.length).toBeGreaterThan(0);
  return started;
}

describe("CalcSandbox processes", () => {
  it("see none of the worker's environment", async () => {
    // jest hands each test file a copy of process.env; a process would inherit the real one.
    const realEnv = runInThisContext("process.env") as NodeJS.ProcessEnv;
    const secret = `secret-${randomUUID()}`;
    realEnv.AGENTRUN_TEST_SECRET = secret;
    try {
      const sandbox = new CalcSandbox({ ...LIMITS, threads: 1 });
      await expect(sandbox.evaluate("1 + 1", running())).resolves.toBe(2);
      const environments = calcProcesses().map((p) => p.environ);
      expect(environments.length).toBeGreaterThan(0);
      // Only what Node sets up for the parent's channel to the process.
      for (const env of environments) expect(env.filter((v) => !v.startsWith("NODE_CHANNEL_"))).toEqual([]);
      expect(environments.flat().join("\n")).not.toContain(secret);
    } finally {
      delete realEnv.AGENTRUN_TEST_SECRET;
    }
  });

  it("fail alone when one allocation passes the heap limit (V8 aborts that process), without a core dump, and the next calculation is answered", async () => {
    const sandbox = new CalcSandbox({ ...LIMITS, threads: 1 });
    const [started] = await startedBy(sandbox);
    // A core of the aborted heap would be hundreds of megabytes per expression.
    expect(started!.limits).toMatch(/^Max core file size\s+0\s+0\s/m);
    const failed = await outcome(sandbox.evaluate("zeros(10000000)", running()), Date.now());
    expect(reason(failed)).toBe("memory");
    await expect(sandbox.evaluate("3 * 3", running())).resolves.toBe(9);
  });

  it("answer an expression whose value overflows the stack while formatted as invalid, from a process that goes on", async () => {
    const sandbox = new CalcSandbox({ ...LIMITS, threads: 1 });
    const [started] = await startedBy(sandbox);
    const failed = await outcome(sandbox.evaluate("reshape([1], ones(20000))", running()), Date.now());
    expect(reason(failed)).toBe("invalid");
    await expect(sandbox.evaluate("3 * 3", running())).resolves.toBe(9);
    expect(alive(started!.pid)).toBe(true);
  });

  it("fail a calculation whose process was ended by someone else as unavailable, not as the expression's fault", async () => {
    const sandbox = new CalcSandbox({ ...LIMITS, timeoutMs: 20_000, threads: 1 });
    const [started] = await startedBy(sandbox);
    const slow = outcome(sandbox.evaluate(SLOW, running()), Date.now());
    // Stopped with the service (systemd's SIGTERM to every process of the unit, Ctrl-C's SIGINT).
    process.kill(started!.pid, "SIGTERM");
    const failed = await slow;
    expect(reason(failed)).toBe("unavailable");
    await expect(sandbox.evaluate("3 * 3", running())).resolves.toBe(9);
  });

  it("stop computing soon after their worker was killed without a word", async () => {
    const fixture = spawn(process.execPath, ["--require", require.resolve("tsx/cjs"), path.join(__dirname, "calc-orphan.fixture.ts")], { stdio: ["ignore", "pipe", "inherit"] });
    let calcPid: number | undefined;
    try {
      let late: NodeJS.Timeout | undefined;
      const computing = await new Promise<string>((resolve, reject) => {
        let out = "";
        late = setTimeout(() => reject(new Error(`the fixture did not start computing: ${out}`)), 20_000);
        fixture.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes("\n")) resolve(out);
        });
        fixture.on("exit", () => reject(new Error(`the fixture ended: ${out}`)));
      }).finally(() => clearTimeout(late));
      expect(computing).toMatch(/^computing \d+/);
      calcPid = calcProcesses(fixture.pid)[0]?.pid;
      expect(calcPid).toBeDefined();
      fixture.kill("SIGKILL");
      // Its own limit is 2 × 1.5 s + 1 s after the calculation began: well within this wait.
      const deadline = Date.now() + 15_000;
      while (alive(calcPid!) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(alive(calcPid!)).toBe(false);
    } finally {
      // Whatever failed above, nothing of this test goes on computing.
      fixture.kill("SIGKILL");
      if (calcPid !== undefined && alive(calcPid)) process.kill(calcPid, "SIGKILL");
    }
  }, 30_000);
});

describe("CalcSandbox.warm", () => {
  it("loads every thread, so that as many calculations as threads start computing at once", async () => {
    const sandbox = new CalcSandbox(LIMITS);
    await sandbox.warm();
    const t0 = Date.now();
    const stopped = await Promise.all([1, 2].map(() => outcome(sandbox.evaluate(SLOW, running()), t0)));
    expect(stopped.map(reason)).toEqual(["timeout", "timeout"]);
    // Side by side: both stopped at the one time limit, neither waited for a thread.
    for (const s of stopped) expect(s.at).toBeLessThan(2 * LIMITS.timeoutMs);
  });
});

describe("CalcSandbox under load", () => {
  it("gives a quick calculation a thread while slow ones take their turns", async () => {
    // A time limit long beside a thread's loading (up to about 2 s on a loaded machine): the two
    // threads that replace the first two slow ones load side by side, and the one that is ready
    // first takes the third slow expression, so the quick one must not wait for its limit too.
    const sandbox = new CalcSandbox({ ...LIMITS, timeoutMs: 3000, maxWaitMs: 30_000 });
    const t0 = Date.now();
    const slow = [1, 2, 3].map(() => outcome(sandbox.evaluate(SLOW, running()), t0));
    const quick = outcome(sandbox.evaluate("1 + 1", running()), t0);
    const [answer, ...stopped] = await Promise.all([quick, ...slow]);
    expect(answer.value).toBe(2);
    expect(stopped.map(reason)).toEqual(["timeout", "timeout", "timeout"]);
    // It waited for one slow expression's time limit at most, not for all three.
    expect(answer.at).toBeLessThan(Math.max(...stopped.map((s) => s.at)));
  });

  it("does not refuse as busy a calculation waiting only for its thread to load", async () => {
    // A thread loads in about 0.5 s (seconds on a loaded machine): far past this wait limit.
    const sandbox = new CalcSandbox({ ...LIMITS, maxWaitMs: 20, threads: 1 });
    const t0 = Date.now();
    const first = outcome(sandbox.evaluate("1 + 1", running()), t0);
    // Second in line: it waits behind the first calculation too, so the limit applies to it.
    const second = outcome(sandbox.evaluate("2 + 2", running()), t0);
    expect(reason(await second)).toBe("busy");
    const answer = await first;
    expect(answer.value).toBe(2);
    expect(answer.at).toBeGreaterThan(20);
  });

  it("refuses a calculation no thread takes within maxWaitMs, without waiting for the slow one", async () => {
    const sandbox = new CalcSandbox({ ...LIMITS, timeoutMs: 2000, maxWaitMs: 300, threads: 1 });
    await sandbox.warm();
    const t0 = Date.now();
    const slow = outcome(sandbox.evaluate(SLOW, running()), t0);
    const waiting = await outcome(sandbox.evaluate("1 + 1", running()), t0);
    expect(reason(waiting)).toBe("busy");
    expect((waiting.error as Error).message).toMatch(/busy/);
    // Answered at its deadline, while the slow one still computed.
    expect(waiting.at).toBeGreaterThanOrEqual(290);
    expect(waiting.at).toBeLessThan(1500);
    expect(reason(await slow)).toBe("timeout");
    await sandbox.warm();
    await expect(sandbox.evaluate("2 + 2", running())).resolves.toBe(4);
  });

  it("lets a cancelled calculation leave the queue without running", async () => {
    const sandbox = new CalcSandbox({ ...LIMITS, threads: 1 });
    await sandbox.warm();
    const t0 = Date.now();
    const slow = outcome(sandbox.evaluate(SLOW, running()), t0);
    const controller = new AbortController();
    const waiting = outcome(sandbox.evaluate("1 + 1", controller.signal), t0);
    setTimeout(() => controller.abort(), 100);
    const stopped = await waiting;
    expect(reason(stopped)).toBe("unstarted");
    // It left the queue while the slow one still held the thread.
    const slowStopped = await slow;
    expect(reason(slowStopped)).toBe("timeout");
    expect(stopped.at).toBeLessThan(slowStopped.at);
  });
});

describe("CalcSandbox without a thread that loads", () => {
  it("fails the waiting calculations as unavailable, not as the expressions' fault, and tries a new thread for the next", async () => {
    // A heap far too small for mathjs: each thread dies while loading.
    const sandbox = new CalcSandbox({ ...LIMITS, maxHeapMb: 1, threads: 1 });
    const spawned = jest.spyOn(calcProcess, "spawnCalcProcess");
    try {
      for (const [i, expression] of ["1 + 1", "2 * 3"].entries()) {
        const failed = await outcome(sandbox.evaluate(expression, running()), Date.now());
        expect(reason(failed)).toBe("unavailable");
        expect((failed.error as Error).message).toMatch(/^the calculator is unavailable: /);
        // A new thread for each: the first failure to load did not give the sandbox up.
        expect(spawned).toHaveBeenCalledTimes(i + 1);
      }
    } finally {
      spawned.mockRestore();
    }
  });
});
