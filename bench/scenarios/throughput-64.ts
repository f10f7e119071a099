import { scaled, type Scenario } from "../lib/context";
import { info, judged } from "../lib/report";
import { benchQuery, measureGateway, measureModel } from "../lib/streaming";
import { round } from "../lib/stats";

/** Runs per second at 64 concurrent streams with an instant 20-chunk answer, and CPU per run. */
export const throughput64: Scenario = {
  name: "throughput-64",
  sharedStack: true,
  description: "64 concurrent streams, instant answer in 20 chunks ([chunks:20]) for ~20 s: runs/s, 0 errors, CPU per run; target ≥ 400 runs/s",
  async run(ctx) {
    const { bench, tenant } = await ctx.streamingStack();
    const durationMs = scaled(ctx, 20_000, 5_000);
    const plan = { label: "throughput-64", concurrency: 64, query: benchQuery("[chunks:20]"), warmup: 128, rampMs: 200, runs: 1_000_000, durationMs };
    ctx.log(`baseline: scripted model directly at concurrency 64 for ${durationMs / 2000} s`);
    const model = await measureModel(ctx, bench, { ...plan, durationMs: durationMs / 2 });
    ctx.log(`gateway: runs at concurrency 64 for ${durationMs / 1000} s`);
    const gw = await measureGateway(ctx, bench, tenant, plan);
    const per = gw.cpuMsPerRun;
    const machineShare = gw.cpuS["machine capacity"] ? gw.cpuS.machine! / gw.cpuS["machine capacity"]! : null;
    return {
      metrics: [
        judged({ name: "runs/s", unit: "runs/s", value: round(gw.runsPerS, 1), baseline: round(model.completionsPerS, 1), note: "baseline: completions/s of the scripted model alone at the same concurrency" }, 400, true, { baselineBound: true }),
        judged({ name: "errors", unit: "", value: gw.errors, baseline: model.errors }, 0),
        info({ name: "runs completed", unit: "", value: gw.completed }),
        info({ name: "CPU per run: gateway", unit: "ms", value: per.gateway ?? null }),
        info({ name: "CPU per run: workers", unit: "ms", value: per.workers ?? null }),
        info({ name: "CPU per run: gateway+workers", unit: "ms", value: per["gateway+workers"] ?? null }),
        info({ name: "CPU per run: scripted model", unit: "ms", value: per.model ?? null }),
        info({ name: "CPU per run: PostgreSQL", unit: "ms", value: per.postgres ?? null }),
        info({ name: "CPU per run: Redis", unit: "ms", value: per.redis ?? null }),
        info({ name: "CPU per run: load generator", unit: "ms", value: per["load generator"] ?? null }),
        info({ name: "CPU per run: other processes", unit: "ms", value: per.other ?? null }),
        info({ name: "CPU per run: whole machine", unit: "ms", value: per.machine ?? null, note: `machine CPU busy ${round((machineShare ?? 0) * 100, 0)}% of its capacity during the run (includes PostgreSQL, Redis and the load generator)` }),
        info({ name: "request → run_completed p50", unit: "ms", value: round(gw.end.p50), baseline: round(model.end.p50) }),
        info({ name: "request → run_completed p99", unit: "ms", value: round(gw.end.p99), baseline: round(model.end.p99) }),
      ],
      details: { plan, gateway: gw, model },
    };
  },
};
