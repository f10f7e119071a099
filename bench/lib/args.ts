/** Command-line options of `npm run bench -- [options]`. */
export interface BenchArgs {
  /** Scenario names to run (all when empty). */
  only: string[];
  /** Shorter runs: fewer requests and shorter durations, same shape. */
  quick: boolean;
  /** Agent worker processes of the streaming stack. */
  workers: number;
  /** Runs at once per worker process (WORKER_CONCURRENCY). */
  workerConcurrency: number;
  /** CPU-profile the gateway and workers during each measured window and summarize the profiles. */
  profile: boolean;
  /**
   * Streaming clients go in rounds (a round's runs start together; the next round starts when its
   * last run has ended) instead of starting spread over one run's duration and going on each alone.
   */
  burst: boolean;
  /** Number of idle streams of `idle-10k`. */
  idleStreams: number;
  /**
   * Seconds of load a freshly started stack gets before anything is measured on it (see
   * bench/lib/warmup.ts); undefined: 20, or 5 with --quick.
   */
  warmupS?: number;
  help: boolean;
}

export const USAGE = `npm run bench -- [--only=a,b] [--quick] [--workers=N] [--worker-concurrency=N] [--idle-streams=N] [--profile] [--burst]

  --only=NAMES            comma-separated scenarios: latency-1, latency-64, throughput-64,
                          concurrency-256, idle-10k, lists-1m (default: all)
  --quick                 shorter runs (about a quarter of the requests and durations)
  --workers=N             agent worker processes of the streaming stack (default 1: on two
                          cores one process does the same work with less CPU than two)
  --worker-concurrency=N  WORKER_CONCURRENCY of each worker (default 256)
  --idle-streams=N        streams held open by idle-10k (default 10000)
  --profile               CPU-profile the gateway and workers and print their hottest functions
  --burst                 streaming clients go in rounds: a round's runs start together, the next
                          round when its last run has ended (default: their first requests are
                          spread over about one run's duration, then each goes on alone)
  --warmup=SECONDS        load on a freshly started stack before measuring it, so that the
                          services' hot code is compiled (default 20; 5 with --quick; 0: none)

Environment: BENCH_DATABASE_ADMIN_URL (else TEST_DATABASE_ADMIN_URL, default
postgresql://postgres@127.0.0.1:5432/postgres), REDIS_URL (default redis://127.0.0.1:6379), BENCH_SERVICE_LOG_LEVEL (default error).`;

export function parseArgs(argv: string[]): BenchArgs {
  const args: BenchArgs = { only: [], quick: false, workers: 1, workerConcurrency: 256, profile: false, burst: false, idleStreams: 10_000, help: false };
  const int = (name: string, v: string | undefined, min: number, max: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}`);
    return n;
  };
  for (const a of argv) {
    const [flag, value] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    switch (flag) {
      case "--only":
        args.only = (value ?? "").split(",").map((s) => s.trim()).filter(Boolean);
        break;
      case "--quick":
        args.quick = true;
        break;
      case "--workers":
        args.workers = int("workers", value, 1, 16);
        break;
      case "--worker-concurrency":
        args.workerConcurrency = int("worker-concurrency", value, 1, 1000);
        break;
      case "--idle-streams":
        args.idleStreams = int("idle-streams", value, 1, 50_000);
        break;
      case "--profile":
        args.profile = true;
        break;
      case "--burst":
        args.burst = true;
        break;
      case "--warmup":
        args.warmupS = int("warmup", value, 0, 600);
        break;
      case "--help":
      case "-h":
        args.help = true;
        break;
      default:
        throw new Error(`unknown option ${a}\n\n${USAGE}`);
    }
  }
  return args;
}

/** Seconds of warm-up load of a freshly started stack (see {@link BenchArgs.warmupS}). */
export const warmupSeconds = (args: BenchArgs) => args.warmupS ?? (args.quick ? 5 : 20);
