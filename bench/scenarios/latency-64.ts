import { scaled, type Scenario } from "../lib/context";
import { latencyScenario } from "../lib/latency";
import { benchQuery } from "../lib/streaming";

/** 64 concurrent streams whose tokens arrive every 20 ms. */
export const latency64: Scenario = {
  name: "latency-64",
  sharedStack: true,
  description: "64 concurrent streams, a token every 20 ms ([sleep:20][chunks:20]); targets p50 ≤ 15 ms, p99 ≤ 100 ms",
  run: (ctx) =>
    latencyScenario(
      ctx,
      { label: "latency-64", concurrency: 64, query: benchQuery("[sleep:20][chunks:20]"), warmup: 128, rampMs: 420, runs: scaled(ctx, 64 * 8, 64 * 2), durationMs: scaled(ctx, 60_000, 20_000) },
      { p50: 15, p99: 100 },
    ),
};
