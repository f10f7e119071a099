import type { BenchContext, ScenarioOutcome } from "./context";
import { info, judged, type Metric } from "./report";
import { measureGateway, measureModel, type StreamingPlan } from "./streaming";
import { minus, round } from "./stats";

export interface LatencyTargets {
  /** Limit of p50 of run_started and of the extra time to the first text_chunk (ms). */
  p50: number;
  p99: number;
}

/**
 * A latency scenario: the scripted model alone (baseline), then the same workload through the
 * gateway. Reports request → run_started, and the time to the first text_chunk beyond the
 * model's own time to first token (percentile of the gateway minus the same percentile of the
 * baseline, both measured in this invocation).
 */
export async function latencyScenario(ctx: BenchContext, plan: StreamingPlan, targets: LatencyTargets): Promise<ScenarioOutcome> {
  const { bench, tenant } = await ctx.streamingStack();
  ctx.log(`baseline: scripted model directly, ${plan.runs} streams at concurrency ${plan.concurrency}`);
  const model = await measureModel(ctx, bench, plan);
  ctx.log(`gateway: ${plan.runs} runs at concurrency ${plan.concurrency}`);
  const gw = await measureGateway(ctx, bench, tenant, plan);
  const extra50 = minus(gw.firstText.p50, model.ttft.p50);
  const extra99 = minus(gw.firstText.p99, model.ttft.p99);
  const metrics: Metric[] = [
    judged({ name: "request → run_started p50", unit: "ms", value: round(gw.runStarted.p50), baseline: round(model.ttft.p50) }, targets.p50),
    judged({ name: "request → run_started p99", unit: "ms", value: round(gw.runStarted.p99), baseline: round(model.ttft.p99) }, targets.p99),
    info({ name: "request → first text_chunk p50", unit: "ms", value: round(gw.firstText.p50), baseline: round(model.ttft.p50) }),
    info({ name: "request → first text_chunk p99", unit: "ms", value: round(gw.firstText.p99), baseline: round(model.ttft.p99) }),
    judged({ name: "extra to first text_chunk p50", unit: "ms", value: round(extra50), baseline: round(model.ttft.p50), note: "gateway first text_chunk p50 minus the model's own time-to-first-token p50" }, targets.p50),
    judged({ name: "extra to first text_chunk p99", unit: "ms", value: round(extra99), baseline: round(model.ttft.p99) }, targets.p99),
    judged({ name: "errors", unit: "", value: gw.errors, baseline: model.errors }, 0),
    info({ name: "runs measured", unit: "", value: gw.count, baseline: model.count }),
  ];
  return { metrics, details: { plan, gateway: gw, model } };
}
