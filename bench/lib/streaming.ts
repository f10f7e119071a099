import type { Tenant } from "@agentrun/testing";
import type { BenchContext } from "./context";
import { profileWindow } from "./profile";
import { steadyLoop } from "./pool";
import { pidsByComm, startCpu, type CpuUse } from "./procfs";
import { closeDispatcher, createDispatcher, timedModelStream, timedRun } from "./sse";
import type { BenchStack } from "./stack";
import { round, summarize, type Summary } from "./stats";

/** A streaming workload: the same directives go to the gateway and, as the baseline, to the model. */
export interface StreamingPlan {
  /** Names the CPU profiles of this workload (--profile). */
  label: string;
  concurrency: number;
  /** The user message, with scripted-model directives. */
  query: string;
  /** Runs sent before measuring, at full load (their figures are dropped). */
  warmup: number;
  /** Measured runs (upper bound). */
  runs: number;
  /** No measured run starts after this long (upper bound). */
  durationMs: number;
  /**
   * The clients' first requests are spread over this long (about one run's duration), so that
   * runs start and end spread over time, as with independent users, instead of in step.
   */
  rampMs: number;
  /** Limit of one run. @defaultValue 60000 */
  timeoutMs?: number;
}

/** The most frequent error messages with their counts. */
function topErrors(errors: string[], n = 5): Record<string, number> {
  const counts = new Map<string, number>();
  for (const e of errors) counts.set(e, (counts.get(e) ?? 0) + 1);
  return Object.fromEntries([...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, n));
}

export interface ModelBaseline {
  ttft: Summary;
  end: Summary;
  count: number;
  errors: number;
  errorSamples: Record<string, number>;
  elapsedMs: number;
  completionsPerS: number;
}

/** The baseline: the scripted model called directly, same directives, same concurrency. */
export async function measureModel(ctx: BenchContext, bench: BenchStack, plan: StreamingPlan): Promise<ModelBaseline> {
  const dispatcher = createDispatcher();
  const call = () => timedModelStream(bench.stack.modelUrl, plan.query, { dispatcher, signal: ctx.signal, timeoutMs: plan.timeoutMs });
  try {
    const { results, elapsedMs, completedInWindow, unmeasuredFailures } = await steadyLoop({ ...loopOf(ctx, plan), fn: call, ok: (r) => r.ok });
    const ok = results.filter((r) => r.ok);
    const failed = [...results.filter((r) => !r.ok), ...unmeasuredFailures];
    return {
      ttft: summarize(ok.map((r) => r.firstText!).filter((v) => v !== null)),
      end: summarize(ok.map((r) => r.end!)),
      count: results.length,
      errors: failed.length,
      errorSamples: topErrors(failed.map((r) => r.error ?? "?")),
      elapsedMs,
      completionsPerS: elapsedMs ? completedInWindow / (elapsedMs / 1000) : 0,
    };
  } finally {
    await closeDispatcher(dispatcher);
  }
}

export interface GatewayMeasurement {
  /** Request sent → `run_started` received. */
  runStarted: Summary;
  /** Request sent → first `text_chunk` received. */
  firstText: Summary;
  /** Request sent → terminal event received. */
  end: Summary;
  count: number;
  completed: number;
  /** Failed runs, measured or not: a run of the warm-up or cool-down that failed counts too. */
  errors: number;
  /** Of `errors`, those of runs started outside the measured window. */
  unmeasuredErrors: number;
  errorSamples: Record<string, number>;
  elapsedMs: number;
  runsPerS: number;
  /** Runs of any phase that completed inside the measured window (the count behind runsPerS). */
  completedInWindow: number;
  /** CPU seconds used during the measured window, by process group and for the whole machine. */
  cpuS: Record<string, number>;
  /** CPU milliseconds per run completed inside the window. */
  cpuMsPerRun: Record<string, number | null>;
  /** What the services printed, when there were errors. */
  logs?: Record<string, string>;
}

/** Streams runs through the gateway (`POST /api/run`, SSE) in a closed loop and times each. */
export async function measureGateway(ctx: BenchContext, bench: BenchStack, tenant: Tenant, plan: StreamingPlan): Promise<GatewayMeasurement> {
  const dispatcher = createDispatcher();
  const expectText = plan.query.endsWith(BENCH_TEXT) ? `Echo: ${BENCH_TEXT}` : undefined;
  const call = () => timedRun(bench.stack.gatewayUrl, tenant.headers, plan.query, { dispatcher, signal: ctx.signal, timeoutMs: plan.timeoutMs, expectText });
  const procs = {
    gateway: () => [bench.gatewayPid],
    workers: () => bench.workerPids,
    model: () => [bench.modelPid],
    postgres: () => pidsByComm("postgres"),
    redis: () => pidsByComm("redis-server"),
    "load generator": () => [process.pid],
  };
  try {
    let stopCpu: (() => CpuUse) | undefined;
    let stopProfile: (() => Promise<void>) | undefined;
    let cpu: CpuUse | undefined;
    const { results, elapsedMs, completedInWindow, unmeasuredFailures } = await steadyLoop({
      ...loopOf(ctx, plan),
      fn: call,
      ok: (r) => r.ok,
      onOpen: () => {
        stopProfile = profileWindow(bench, ctx.profileDir, plan.label);
        stopCpu = startCpu(procs);
      },
      onClose: () => {
        cpu = stopCpu?.();
      },
    });
    await stopProfile?.();
    const measured = cpu ?? { cpuS: {}, machine: { busy: 0, total: 0 } };
    const ok = results.filter((r) => r.ok);
    const failed = [...results.filter((r) => !r.ok), ...unmeasuredFailures];
    const cpuS = measured.cpuS;
    const known = Object.values(cpuS).reduce((a, b) => a + b, 0);
    cpuS["gateway+workers"] = cpuS.gateway! + cpuS.workers!;
    cpuS.machine = measured.machine.busy;
    // Everything else on the machine (other users' processes, the kernel, processes that exited).
    cpuS.other = Math.max(0, cpuS.machine - known);
    cpuS["machine capacity"] = measured.machine.total;
    const cpuMsPerRun: Record<string, number | null> = {};
    for (const [k, v] of Object.entries(cpuS)) if (k !== "machine capacity") cpuMsPerRun[k] = completedInWindow ? round((v * 1000) / completedInWindow, 3) : null;
    return {
      // Of the runs that completed, as the model's own time to first token is (failed runs count
      // as errors instead).
      runStarted: summarize(ok.map((r) => r.runStarted).filter((v): v is number => v !== null)),
      firstText: summarize(ok.map((r) => r.firstText).filter((v): v is number => v !== null)),
      end: summarize(ok.map((r) => r.end!)),
      count: results.length,
      completed: ok.length,
      completedInWindow,
      errors: failed.length,
      unmeasuredErrors: unmeasuredFailures.length,
      errorSamples: topErrors(failed.map((r) => r.error ?? "?")),
      elapsedMs,
      runsPerS: elapsedMs ? completedInWindow / (elapsedMs / 1000) : 0,
      cpuS,
      cpuMsPerRun,
      logs: failed.length > 0 ? bench.logTail() : undefined,
    };
  } finally {
    await closeDispatcher(dispatcher);
  }
}

/** The loop of a plan: warm-up, measured window and spread start as planned (`--burst`: rounds of all clients at once). */
function loopOf(ctx: BenchContext, plan: StreamingPlan) {
  return { concurrency: plan.concurrency, warmup: plan.warmup, maxCount: plan.runs, durationMs: plan.durationMs, rampMs: plan.rampMs, burst: ctx.args.burst, signal: ctx.signal };
}

/** The text of every streaming workload's query; the scripted model answers `Echo: <it>`. */
const BENCH_TEXT = "The quick brown fox jumps over the lazy dog while the benchmark measures every chunk.";

/** A query whose echoed answer is long enough for `chunks` chunks. */
export function benchQuery(directives: string): string {
  return `${directives} ${BENCH_TEXT}`;
}
