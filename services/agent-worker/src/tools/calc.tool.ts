import { z } from "zod";
import { CalcFailure, CalcSandbox } from "./calc-sandbox";
import { defineAction, StoppedBeforeStart, ToolError } from "./tool";

/** Longest a calculation may compute, and heap it may use (the longest answer: calc-limits.ts). */
export const CALC_TIMEOUT_MS = 1000;
export const CALC_MAX_HEAP_MB = 64;
/** Calc processes ("threads") per worker process: a slow expression leaves the other to the other runs. */
export const CALC_THREADS = 2;
/**
 * Longest a calculation may wait for a free thread. A calculation queued behind a full set of
 * slow ones gets the first thread started after they time out (a thread loads in about a second);
 * a longer queue is refused rather than delaying every run's calculations further.
 */
export const CALC_MAX_WAIT_MS = 3000;

// The worker process's calc threads (processes, see CalcSandbox), started as calculations need them.
const sandbox = new CalcSandbox({ timeoutMs: CALC_TIMEOUT_MS, maxWaitMs: CALC_MAX_WAIT_MS, maxHeapMb: CALC_MAX_HEAP_MB, threads: CALC_THREADS });

/** Starts the process's calc threads now and resolves once they are loaded. */
export const warmCalcThreads = () => sandbox.warm();

/**
 * The tool error for each way a calculation fails (a stopped run is reported as the stop). An
 * expression that found no free thread, or no thread at all, was never evaluated: not charged.
 */
const FAILURES: Record<Exclude<CalcFailure["reason"], "aborted" | "unstarted">, { code: string; charged: boolean }> = {
  invalid: { code: "invalid_expression", charged: true },
  oversized: { code: "too_expensive", charged: true },
  timeout: { code: "too_expensive", charged: true },
  memory: { code: "too_expensive", charged: true },
  // Nothing wrong with the expression: it may be asked again.
  busy: { code: "busy", charged: false },
  unavailable: { code: "unavailable", charged: false },
};

export const calcEvaluate = defineAction({
  tool: "calc",
  action: "evaluate",
  description: "Evaluates an arithmetic expression, e.g. '(2 + 3) * 4 / 5' or 'sqrt(16) + 2^3'.",
  params: z.strictObject({ expression: z.string().min(1).max(1000).describe("The expression to evaluate") }),
  async run({ expression }, ctx) {
    try {
      return { expression, result: await sandbox.evaluate(expression, ctx.signal) };
    } catch (err) {
      if (!(err instanceof CalcFailure)) throw err;
      // A stopped run: the registry reports the stop, not a tool error.
      if (err.reason === "aborted") throw ctx.signal.reason ?? err;
      if (err.reason === "unstarted") throw new StoppedBeforeStart(ctx.signal.reason);
      const { code, charged } = FAILURES[err.reason];
      throw new ToolError(code, `Cannot evaluate '${expression}': ${err.message}.`, { charged });
    }
  },
});
