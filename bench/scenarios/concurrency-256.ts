import { scaled, type Scenario } from "../lib/context";
import { info, judged } from "../lib/report";
import { benchQuery, measureGateway, measureModel } from "../lib/streaming";
import { minus, round } from "../lib/stats";

/** 256 concurrent streams with a token every 20 ms: no errors, first event quickly. */
export const concurrency256: Scenario = {
  name: "concurrency-256",
  sharedStack: true,
  description: "256 concurrent streams, a token every 20 ms ([sleep:20][chunks:20]): 0 errors, time to first event p50 ≤ 100 ms",
  async run(ctx) {
    const { bench, tenant } = await ctx.streamingStack();
    const plan = { label: "concurrency-256", concurrency: 256, query: benchQuery("[sleep:20][chunks:20]"), warmup: 512, rampMs: 420, runs: scaled(ctx, 256 * 4, 256 * 2), durationMs: scaled(ctx, 30_000, 15_000) };
    ctx.log(`baseline: scripted model directly, ${plan.runs} streams at concurrency 256`);
    const model = await measureModel(ctx, bench, plan);
    ctx.log(`gateway: ${plan.runs} runs at concurrency 256`);
    const gw = await measureGateway(ctx, bench, tenant, plan);
    const capacity = ctx.args.workers * ctx.args.workerConcurrency;
    return {
      metrics: [
        judged({ name: "request → first event (run_started) p50", unit: "ms", value: round(gw.runStarted.p50), baseline: round(model.ttft.p50) }, 100),
        info({ name: "request → first event (run_started) p99", unit: "ms", value: round(gw.runStarted.p99), baseline: round(model.ttft.p99) }),
        judged({ name: "errors", unit: "", value: gw.errors, baseline: model.errors }, 0),
        info({ name: "extra to first text_chunk p50", unit: "ms", value: round(minus(gw.firstText.p50, model.ttft.p50)), baseline: round(model.ttft.p50) }),
        info({ name: "extra to first text_chunk p99", unit: "ms", value: round(minus(gw.firstText.p99, model.ttft.p99)), baseline: round(model.ttft.p99) }),
        info({ name: "request → run_completed p50", unit: "ms", value: round(gw.end.p50), baseline: round(model.end.p50) }),
        info({
          name: "runs/s",
          unit: "runs/s",
          value: round(gw.runsPerS, 1),
          baseline: round(model.completionsPerS, 1),
          note: capacity < 256 ? `the workers execute at most ${capacity} runs at once (--workers × --worker-concurrency); the rest wait in the queue` : undefined,
        }),
        info({ name: "runs measured", unit: "", value: gw.count, baseline: model.count }),
      ],
      details: { plan, workerCapacity: capacity, gateway: gw, model },
    };
  },
};
