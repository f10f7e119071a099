import type { EventEmitter } from "node:events";
import autocannon from "autocannon";
import { summarize, type Summary } from "./stats";

export interface LoadOptions {
  headers?: Record<string, string>;
  connections: number;
  /** Bound on time. */
  durationS: number;
  /** Bound on count. */
  maxRequests: number;
  signal: AbortSignal;
}

export interface LoadResult {
  url: string;
  connections: number;
  requests: number;
  rps: number;
  /** Response times in ms from autocannon's per-response events (sub-millisecond resolution). */
  latency: Summary;
  /** autocannon's own histogram p99 (whole milliseconds). */
  autocannonP99: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
}

/** Plain request/response load with autocannon: `connections` keep-alive connections for `durationS`. */
export function load(url: string, opts: LoadOptions): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    const instance = autocannon(
      { url, connections: opts.connections, duration: opts.durationS, maxOverallRequests: opts.maxRequests, headers: opts.headers, timeout: 10 },
      (err, res) => {
        opts.signal.removeEventListener("abort", stop);
        if (err) return reject(err);
        const statusCodes: Record<string, number> = {};
        for (const [code, v] of Object.entries(res.statusCodeStats ?? {})) statusCodes[code] = v?.count ?? 0;
        resolve({
          url,
          connections: opts.connections,
          requests: res.requests.total,
          rps: res.requests.total / res.duration,
          latency: summarize(latencies),
          autocannonP99: res.latency.p99,
          non2xx: res.non2xx,
          errors: res.errors,
          timeouts: res.timeouts,
          statusCodes,
        });
      },
    );
    // The tracker emits (client, statusCode, bytes, ms) for every response.
    (instance as unknown as EventEmitter).on("response", (_client: unknown, statusCode: number, _bytes: number, ms: number) => {
      if (statusCode >= 200 && statusCode < 300 && latencies.length < 2_000_000) latencies.push(ms);
    });
    const stop = () => instance.stop();
    opts.signal.addEventListener("abort", stop, { once: true });
  });
}
