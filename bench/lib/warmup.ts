import type { Tenant } from "@agentrun/testing";
import type { BenchContext } from "./context";
import { closedLoop } from "./pool";
import { closeDispatcher, createDispatcher, timedRun } from "./sse";
import type { BenchStack } from "./stack";
import { benchQuery } from "./streaming";

/** What a warm-up did: how long it ran, how many runs it completed and how many failed. */
export interface WarmupOutcome {
  ms: number;
  runs: number;
  errors: number;
  /** The first failed run's error, if any failed. */
  firstError?: string;
}

/**
 * Puts a freshly started streaming stack under load before anything is measured on it. A
 * service process goes on compiling its hot functions for the first seconds of load: with
 * `--trace-opt` the gateway and the worker each optimized 100-200 functions per second for about
 * ten seconds of full load, and 10-30 per second only after twenty, on a background thread that
 * takes a core's share from the processes being measured. A scenario measured on a stack started
 * seconds earlier measures that compilation too, which a service running for hours does not do.
 *
 * The load mixes what the scenarios send: instant answers (the runs' start and end) and answers
 * streamed a token every 20 ms (the per-chunk relay), 64 runs at a time. Nothing of it is
 * reported but its count; each scenario still has its own warm-up at its own load.
 */
export async function warmStreamingStack(ctx: BenchContext, bench: BenchStack, tenant: Tenant, durationMs: number): Promise<WarmupOutcome> {
  const dispatcher = createDispatcher();
  const queries = [benchQuery("[chunks:20]"), benchQuery("[sleep:20][chunks:20]")];
  const started = performance.now();
  try {
    const { results } = await closedLoop({
      concurrency: 64,
      maxCount: Number.MAX_SAFE_INTEGER,
      durationMs,
      signal: ctx.signal,
      fn: (n) => timedRun(bench.stack.gatewayUrl, tenant.headers, queries[n % queries.length]!, { dispatcher, signal: ctx.signal }),
    });
    const failed = results.filter((r) => !r.ok);
    return { ms: Math.round(performance.now() - started), runs: results.length - failed.length, errors: failed.length, firstError: failed[0]?.error };
  } finally {
    await closeDispatcher(dispatcher);
  }
}
