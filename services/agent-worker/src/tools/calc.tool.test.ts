import net from "node:net";
import { createMemoryClient } from "@agentrun/memory-client";
import { CALC_MAX_WAIT_MS, CALC_TIMEOUT_MS, calcEvaluate, warmCalcThreads } from "./calc.tool";
import { StoppedBeforeStart, ToolError, type ToolContext } from "./tool";

let ctx: ToolContext;

beforeAll(async () => {
  // A real memory client on a port nobody listens on: the calculator never calls it.
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  ctx = { orgId: "org_test", agentId: "agt_test", runId: "run_test", httpAllowlist: [], memory: createMemoryClient({ baseUrl: `http://127.0.0.1:${port}`, token: "t" }), signal: new AbortController().signal };
});

const evaluate = (expression: string) => calcEvaluate.run({ expression }, ctx);

/** Computes for far longer than a calculation may. */
const SLOW = "f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(40)";

/** `expression` evaluated for a run of its own: how it settled, and when (ms since `t0`). */
async function outcome(expression: string, t0: number): Promise<{ at: number; value?: unknown; error?: unknown }> {
  try {
    const value = await calcEvaluate.run({ expression }, { ...ctx, signal: new AbortController().signal });
    return { at: Date.now() - t0, value };
  } catch (error) {
    return { at: Date.now() - t0, error };
  }
}

/** The ToolError `evaluate(expression)` rejects with. */
async function failure(expression: string): Promise<ToolError> {
  const err = await evaluate(expression).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

describe("calc_evaluate", () => {
  it("is the calc tool's evaluate action", () => {
    expect([calcEvaluate.tool, calcEvaluate.action]).toEqual(["calc", "evaluate"]);
  });

  it.each([
    ["2+3*4", 14],
    ["(2 + 3) * 4 / 5", 4],
    ["2^10", 1024],
    ["-7 mod 3", 2],
    ["5!", 120],
    ["10 / 4", 2.5],
  ])("evaluates the arithmetic %s", async (expression, result) => {
    await expect(evaluate(expression)).resolves.toEqual({ expression, result });
  });

  it.each([
    ["sqrt(16) + 2^3", 12],
    ["abs(-3) + max(1, 5, 2)", 8],
    ["round(pi, 4)", 3.1416],
    ["cos(pi)", -1],
    ["log(1000, 10)", 3],
  ])("evaluates the function call %s", async (expression, result) => {
    const out = (await evaluate(expression)) as { result: number };
    expect(out.result).toBeCloseTo(result, 10);
  });

  it("answers comparisons as booleans", async () => {
    await expect(evaluate("3 > 2")).resolves.toEqual({ expression: "3 > 2", result: true });
  });

  it("formats values that are not plain numbers: units, complex numbers, matrices", async () => {
    await expect(evaluate("2 inch to cm")).resolves.toEqual({ expression: "2 inch to cm", result: "5.08 cm" });
    await expect(evaluate("sqrt(-4)")).resolves.toEqual({ expression: "sqrt(-4)", result: "2i" });
    await expect(evaluate("[1, 2] + [3, 4]")).resolves.toEqual({ expression: "[1, 2] + [3, 4]", result: "[4, 6]" });
  });

  it("keeps no state between calls", async () => {
    await expect(evaluate("x = 5")).resolves.toEqual({ expression: "x = 5", result: 5 });
    expect((await failure("x + 1")).code).toBe("invalid_expression");
  });

  it.each([
    'import({ evil: 1 }, { override: true })',
    'evaluate("1")',
    'parse("1 + 1")',
    'compile("1 + 1")',
    'createUnit("foo")',
    'simplify("x + x")',
    'derivative("x^2", "x")',
    'resolve("x", {})',
    'simplifyCore("x + 0")',
    'simplifyConstant("1 + 2")',
    'leafCount("x + 1")',
    'rationalize("1/x + 1")',
    'parser()',
  ])("refuses the disabled function in %s with invalid_expression", async (expression) => {
    const err = await failure(expression);
    expect(err.code).toBe("invalid_expression");
    expect(err.message).toContain("function disabled");
  });

  it("still has working units after createUnit was refused", async () => {
    await failure('createUnit("foo")');
    expect((await failure("2 foo")).code).toBe("invalid_expression");
    await expect(evaluate("1 km to m")).resolves.toMatchObject({ result: "1000 m" });
  });

  it.each(["2+", "(1 + 2", "3 $ 4", "sqrt(", "1 +* 2", "unknownFunction(2)"])("answers invalid_expression for %s", async (expression) => {
    const err = await failure(expression);
    expect(err.code).toBe("invalid_expression");
    expect(err.message).toContain(expression);
  });

  it.each(["f(x) = x^2", "f(x) = x^2; f", "cos"])("answers invalid_expression when %s gives a function instead of a value", async (expression) => {
    const err = await failure(expression);
    expect(err.code).toBe("invalid_expression");
    expect(err.message).toMatch(/does not evaluate to a value/);
  });

  it("gives the value of the last statement, and strings as they are", async () => {
    await expect(evaluate("f(x) = x^2; f(3)")).resolves.toMatchObject({ result: 9 });
    await expect(evaluate("a = 2\nb = a * 3\nb + 1")).resolves.toMatchObject({ result: 7 });
    await expect(evaluate('concat("a", "b")')).resolves.toMatchObject({ result: "ab" });
    // A trailing `;` (which hides a statement's value in mathjs) does not take the last value away.
    await expect(evaluate("2+3;")).resolves.toMatchObject({ result: 5 });
    await expect(evaluate("x=3; y=4; x*y;\n")).resolves.toMatchObject({ result: 12 });
  });

  it("keeps an error that quotes a huge value short: 16 million characters built by a short expression", async () => {
    const expression = `s="a"${';s=concat(s,s)'.repeat(24)};bignumber(s)`;
    expect(expression.length).toBeLessThan(400);
    const err = await failure(expression);
    expect(err.code).toBe("invalid_expression");
    expect(err.message.length).toBeLessThan(1000);
  });
});

describe("calc_evaluate without a finite value", () => {
  it.each(["1/0", "-1/0", "0/0"])("refuses %s instead of returning null", async (expression) => {
    await expect(evaluate(expression)).rejects.toMatchObject({ code: "invalid_expression" });
  });
});

describe("calc_evaluate limits", () => {
  it("refuses config(), which would change how every later expression of every run evaluates", async () => {
    expect((await failure("config({number: 'BigNumber', relTol: 0.5})")).message).toContain("function disabled");
    await expect(evaluate("1 == 1.5")).resolves.toEqual({ expression: "1 == 1.5", result: false });
    await expect(evaluate("0.1 + 0.2")).resolves.toEqual({ expression: "0.1 + 0.2", result: 0.30000000000000004 });
  });

  it("refuses properties, through which typed.clear() or a new conversion would change every later calculation", async () => {
    for (const expression of ["typed.clear()", "typed.clearConversions()", 'typed["clear"]()', "f = typed; f.clear()", "typed.onMismatch = 1", "x = {a: 2}; x.a"]) {
      const err = await failure(expression);
      expect({ expression, code: err.code, message: err.message }).toEqual({ expression, code: "invalid_expression", message: expect.stringMatching(/properties \((clear|clearConversions|onMismatch|a)\) cannot be used/) });
    }
    // A name built as the expression runs is refused by mathjs for a function.
    expect((await failure('typed[concat("cl", "ear")]()')).code).toBe("invalid_expression");
    // Numbers, units and conversions still evaluate as they should in the same threads.
    await expect(evaluate("log(100, 10)")).resolves.toMatchObject({ result: 2 });
    await expect(evaluate("sin(pi / 2)")).resolves.toMatchObject({ result: 1 });
    await expect(evaluate("5 cm to inch")).resolves.toMatchObject({ result: expect.stringMatching(/^1\.9685039370079 inch$/) });
    await expect(evaluate("sqrt(true)")).resolves.toMatchObject({ result: 1 });
    await expect(evaluate("size([1, 2; 3, 4])[1]")).resolves.toMatchObject({ result: 2 });
  });

  it("stops an expression that computes too long, on its own thread, and goes on with the next", async () => {
    // The worker's event loop stays free meanwhile: a timer due long before the time limit fires
    // before the failure arrives (on the event loop's thread it would fire only after it).
    const order: string[] = [];
    const timer = new Promise<void>((resolve) => setTimeout(() => (order.push("timer"), resolve()), 100));
    const err = await failure("f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(40)");
    order.push("failure");
    await timer;
    expect(err.code).toBe("too_expensive");
    expect(order).toEqual(["timer", "failure"]);
    await expect(evaluate("2 + 2")).resolves.toEqual({ expression: "2 + 2", result: 4 });
  });

  it("stops an expression that needs too much memory without harming the worker", async () => {
    // Row by row, and in one allocation past the heap limit (which makes V8 abort its process:
    // run in this test's own process, it would take the test runner down).
    for (const expression of ["size(zeros(100000, 100000))", "zeros(10000000)"]) {
      const err = await failure(expression);
      expect({ expression, code: err.code }).toEqual({ expression, code: "too_expensive" });
      await expect(evaluate("3 * 3")).resolves.toEqual({ expression: "3 * 3", result: 9 });
    }
  });

  it("refuses an answer too long to hand to the model, and says how long it was", async () => {
    const matrix = await failure("ones(300, 300)");
    expect([matrix.code, matrix.message]).toEqual(["too_expensive", expect.stringMatching(/: its answer has \d{6} characters; at most 10000 are returned\.$/)]);
    const doubled = await failure(`s="ab"${";s=concat(s,s)".repeat(22)};s`);
    expect([doubled.code, doubled.message]).toEqual(["too_expensive", expect.stringMatching(/: its answer has 8388608 characters; at most 10000 are returned\.$/)]);
  });

  it("stops at once when the run is cancelled, with the run's stop reason", async () => {
    // A thread loaded and free: the expression computes when the cancel comes.
    await warmCalcThreads();
    const controller = new AbortController();
    const pending = calcEvaluate.run({ expression: "f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(40)" }, { ...ctx, signal: controller.signal });
    setTimeout(() => controller.abort("cancel"), 50);
    const t0 = Date.now();
    await expect(pending).rejects.toBe("cancel");
    // Not at the expression's time limit.
    expect(Date.now() - t0).toBeLessThan(CALC_TIMEOUT_MS);
    await expect(evaluate("1 + 1")).resolves.toEqual({ expression: "1 + 1", result: 2 });
  });

  it("evaluates calls of many runs at once, each with its own answer", async () => {
    // Each run has its own signal, as in the worker.
    const outs = await Promise.all(Array.from({ length: 20 }, (_, i) => calcEvaluate.run({ expression: `${i} * 2` }, { ...ctx, signal: new AbortController().signal })));
    expect(outs.map((o) => (o as { result: number }).result)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
  });
});

describe("calc_evaluate under load from other runs", () => {
  it("answers a quick calculation on the other thread while another run's slow one computes", async () => {
    // Both threads loaded, as in a worker that has calculated before.
    await warmCalcThreads();
    const t0 = Date.now();
    const slow = outcome(SLOW, t0);
    const quick = await outcome("1 + 1", t0);
    expect(quick.value).toEqual({ expression: "1 + 1", result: 2 });
    const stopped = await slow;
    expect((stopped.error as ToolError).code).toBe("too_expensive");
    // It computed until it was stopped: charged.
    expect((stopped.error as ToolError).charged).toBe(true);
    // Answered at once, not after the slow one's time limit (queueing order: calc-sandbox.test.ts).
    expect(quick.at).toBeLessThan(stopped.at);
  });

  it("says a calculation cancelled while it waited for a thread never started (so it is not charged)", async () => {
    await warmCalcThreads();
    const t0 = Date.now();
    const slow = [outcome(SLOW, t0), outcome(SLOW, t0)];
    const controller = new AbortController();
    const waiting = calcEvaluate.run({ expression: "1 + 1" }, { ...ctx, signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort("cancel"), 50);
    const err = await waiting;
    expect(err).toBeInstanceOf(StoppedBeforeStart);
    expect((err as StoppedBeforeStart).reason).toBe("cancel");
    // The calculations on the threads went on to their own end.
    expect((await Promise.all(slow)).map((s) => (s.error as ToolError).code)).toEqual(["too_expensive", "too_expensive"]);
  });

  it("refuses as busy, unevaluated, a calculation that found no free thread in time", async () => {
    const t0 = Date.now();
    const slow = Array.from({ length: 8 }, () => outcome(SLOW, t0));
    const [quick, ...stopped] = await Promise.all([outcome("1 + 1", t0), ...slow]);
    expect(quick.error).toBeInstanceOf(ToolError);
    // Never evaluated: not charged.
    expect(quick.error).toMatchObject({ code: "busy", message: expect.stringMatching(/^Cannot evaluate '1 \+ 1': the calculator is busy/), charged: false });
    expect(quick.at).toBeGreaterThanOrEqual(CALC_MAX_WAIT_MS - 10);
    expect(quick.at).toBeLessThan(CALC_MAX_WAIT_MS + 1000);
    // The slow ones that got a thread ran out of time; the others found none either.
    const codes = stopped.map((s) => (s.error as ToolError).code);
    expect(codes.every((c) => c === "too_expensive" || c === "busy")).toBe(true);
    expect(codes.filter((c) => c === "too_expensive").length).toBeGreaterThanOrEqual(2);
    await expect(evaluate("2 + 2")).resolves.toEqual({ expression: "2 + 2", result: 4 });
  });
});
