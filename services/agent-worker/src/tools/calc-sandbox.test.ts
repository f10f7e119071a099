import { randomUUID } from "node:crypto";
import { Session } from "node:inspector";
import { runInThisContext } from "node:vm";
import { CalcFailure, CalcSandbox, type CalcLimits } from "./calc-sandbox";

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

/**
 * The value of the JavaScript `expression` evaluated inside the newest thread of this process,
 * read through the inspector as a debugger would: nothing in the thread helps.
 */
async function inNewestThread(expression: string): Promise<unknown> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
  try {
    const threads: { sessionId: string; threadId: number }[] = [];
    session.on("NodeWorker.attachedToWorker", ({ params }: { params: { sessionId: string; workerInfo: { title: string } } }) => {
      // The title is "[worker <threadId>]"; threads are numbered as they start.
      threads.push({ sessionId: params.sessionId, threadId: Number(/^\[worker (\d+)\]/.exec(params.workerInfo.title)?.[1]) });
    });
    // Running threads are reported before this answers.
    await post("NodeWorker.enable", { waitForDebuggerOnStart: false });
    const newest = threads.sort((a, b) => b.threadId - a.threadId)[0];
    if (!newest) throw new Error("no thread is running");
    const answer = new Promise<{ result: { result: { value: unknown } } }>((resolve) =>
      session.on("NodeWorker.receivedMessageFromWorker", ({ params }: { params: { sessionId: string; message: string } }) => {
        const message = JSON.parse(params.message) as { id?: number; result: { result: { value: unknown } } };
        if (params.sessionId === newest.sessionId && message.id === 1) resolve(message);
      }),
    );
    const message = { id: 1, method: "Runtime.evaluate", params: { expression, returnByValue: true } };
    await post("NodeWorker.sendMessageToWorker", { sessionId: newest.sessionId, message: JSON.stringify(message) });
    return (await answer).result.result.value;
  } finally {
    session.disconnect();
  }
}

describe("CalcSandbox threads", () => {
  it("see none of the worker's environment", async () => {
    // jest hands each test file a copy of process.env; a thread would inherit the real one.
    const realEnv = runInThisContext("process.env") as NodeJS.ProcessEnv;
    const secret = `secret-${randomUUID()}`;
    realEnv.AGENTRUN_TEST_SECRET = secret;
    try {
      const sandbox = new CalcSandbox(LIMITS);
      await expect(sandbox.evaluate("1 + 1", running())).resolves.toBe(2);
      // The sandbox's thread is the newest: no other starts meanwhile.
      expect(await inNewestThread("process.env.AGENTRUN_TEST_SECRET")).toBeUndefined();
      expect(await inNewestThread("Object.keys(process.env)")).toEqual([]);
      // The thread still evaluates after being looked into.
      await expect(sandbox.evaluate("2 * 3", running())).resolves.toBe(6);
    } finally {
      delete realEnv.AGENTRUN_TEST_SECRET;
    }
  });
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
    expect(reason(stopped)).toBe("aborted");
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
    for (const expression of ["1 + 1", "2 * 3"]) {
      const failed = await outcome(sandbox.evaluate(expression, running()), Date.now());
      expect(reason(failed)).toBe("unavailable");
      expect((failed.error as Error).message).toMatch(/^the calculator is unavailable: /);
    }
  });
});
