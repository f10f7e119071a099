import { scaled, type Scenario } from "../lib/context";
import { latencyScenario } from "../lib/latency";
import { benchQuery } from "../lib/streaming";

/** One stream at a time, instant answer in 20 chunks: the gateway's own latency, unloaded. */
export const latency1: Scenario = {
  name: "latency-1",
  sharedStack: true,
  description: "1 stream at a time ([chunks:20], instant): request → run_started and extra time to first text_chunk; targets p50 ≤ 5 ms, p99 ≤ 20 ms",
  run: (ctx) =>
    latencyScenario(
      ctx,
      { label: "latency-1", concurrency: 1, query: benchQuery("[chunks:20]"), warmup: scaled(ctx, 20, 10), rampMs: 0, runs: scaled(ctx, 200, 50), durationMs: scaled(ctx, 60_000, 20_000) },
      { p50: 5, p99: 20 },
    ),
};
