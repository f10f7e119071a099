/**
 * `npm run bench`: starts the whole stack on this machine (scripted model, memory service,
 * gateway, agent workers) against its own database and Redis prefix, drives it over real HTTP,
 * compares every figure with a baseline measured in the same invocation, prints a table and
 * writes bench/results/<iso-timestamp>.json. See docs/performance.md.
 */
import { setMaxListeners } from "node:events";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { spawnSync } from "node:child_process";
import type { Tenant } from "@agentrun/testing";
import { parseArgs, USAGE, warmupSeconds } from "./lib/args";
import { exitAfterCleanups, installSignalHandlers, onCleanup, shutdownSignal } from "./lib/cleanup";
import type { BenchContext, Scenario } from "./lib/context";
import { autovacuumEnabled, benchDatabaseUrl, benchRedisUrl, dropRedisPrefix, dropStaleBenchKeys, endLeftoverRuns, prepareDatabase, vacuumHotTables } from "./lib/env";
import { summarizeProfiles } from "./lib/profile";
import { printTable, writeResults, type ScenarioResult } from "./lib/report";
import { benchTenant, startBenchStack, type BenchStack } from "./lib/stack";
import { loopbackRoundTripUs, speedProbeMs } from "./lib/speed-probe";
import { round } from "./lib/stats";
import { warmStreamingStack, type WarmupOutcome } from "./lib/warmup";
import { concurrency256 } from "./scenarios/concurrency-256";
import { idle10k } from "./scenarios/idle-10k";
import { latency1 } from "./scenarios/latency-1";
import { latency64 } from "./scenarios/latency-64";
import { lists1m } from "./scenarios/lists-1m";
import { throughput64 } from "./scenarios/throughput-64";

const SCENARIOS: Scenario[] = [latency1, latency64, throughput64, concurrency256, idle10k, lists1m];
const RESULTS_DIR = path.join(__dirname, "results");

const version = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: "utf8" }).stdout?.trim().split("\n")[0] ?? null;

interface SpeedProbe {
  /** Fixed CPU work, ms (median of 7). */
  computeMs: number;
  /** Loopback TCP round trip to another process, µs (median of 4,000). */
  roundTripUs: number;
}

const probeSpeed = async (): Promise<SpeedProbe> => ({ computeMs: speedProbeMs(), roundTripUs: await loopbackRoundTripUs() });
const showProbe = (p: SpeedProbe) => `${p.computeMs} ms of fixed CPU work, ${p.roundTripUs} µs per loopback round trip`;

function machine(autovacuum: boolean, speedProbe: { before: SpeedProbe; after: SpeedProbe }) {
  return {
    speedProbe,
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? null,
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    node: process.version,
    postgres: version("psql", ["--version"]),
    redis: version("redis-server", ["--version"]),
    kernel: os.release(),
    autovacuum,
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.help) {
    console.log(USAGE);
    return;
  }
  const unknown = args.only.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length) throw new Error(`unknown scenario ${unknown.join(", ")}; known: ${SCENARIOS.map((s) => s.name).join(", ")}`);
  const selected = SCENARIOS.filter((s) => args.only.length === 0 || args.only.includes(s.name));
  installSignalHandlers();
  setMaxListeners(1_000_000, shutdownSignal);

  const startedAt = new Date();
  const stamp = startedAt.getTime();
  const redisUrl = benchRedisUrl();
  const redisPrefix = `agentrun-bench-${stamp}`;
  const databaseUrl = benchDatabaseUrl("agentrun_bench");
  const profileDir = args.profile ? path.join(RESULTS_DIR, `profiles-${startedAt.toISOString().replaceAll(":", "-")}`) : undefined;
  process.env.REDIS_URL = redisUrl;
  onCleanup("redis keys", async () => void (await dropRedisPrefix(redisUrl, redisPrefix)));
  const log = (m: string) => process.stdout.write(`  ${m}\n`);
  console.log(`agentrun bench: ${selected.map((s) => s.name).join(", ")}${args.quick ? " (quick)" : ""}`);
  console.log(`  database ${new URL(databaseUrl).pathname.slice(1)}, redis prefix ${redisPrefix}`);
  await prepareDatabase(databaseUrl);
  const staleKeys = await dropStaleBenchKeys(redisUrl);
  if (staleKeys) console.log(`  deleted ${staleKeys} Redis key(s) left by interrupted earlier invocations`);
  const leftovers = await endLeftoverRuns(databaseUrl);
  if (leftovers) console.log(`  ended ${leftovers} run(s) left in progress by an interrupted earlier invocation`);
  const autovacuum = await autovacuumEnabled(databaseUrl);
  const speedBefore = await probeSpeed();
  console.log(`  machine speed probe: ${showProbe(speedBefore)} (lower is faster; see docs/performance.md)`);
  if (!autovacuum) console.log("  PostgreSQL runs with autovacuum off: the harness vacuums the run tables before each scenario");

  let shared = null as Promise<{ bench: BenchStack; tenant: Tenant }> | null;
  const warmups: (WarmupOutcome & { stack: string })[] = [];
  const ctx: BenchContext = {
    args,
    signal: shutdownSignal,
    redisUrl,
    redisPrefix,
    databaseUrl,
    profileDir,
    log,
    streamingStack: () =>
      (shared ??= (async () => {
        log(`starting the stack: gateway, ${args.workers} worker(s) × concurrency ${args.workerConcurrency}, memory, scripted model`);
        const bench = await startBenchStack({ databaseUrl, redisPrefix, workers: args.workers, workerConcurrency: args.workerConcurrency, profileDir: profileDir && path.join(profileDir, "streaming") });
        const tenant = await benchTenant(bench.prisma);
        const warmupS = warmupSeconds(args);
        if (warmupS > 0) {
          log(`warming the stack up: ${warmupS} s of 64 streams (instant and 20 ms-token answers), not measured`);
          const w = await warmStreamingStack(ctx, bench, tenant, warmupS * 1000);
          warmups.push({ stack: "streaming", ...w });
          log(`warm-up: ${w.runs} runs in ${round(w.ms / 1000, 1)} s${w.errors ? `, ${w.errors} failed (${w.firstError})` : ""}`);
        }
        return { bench, tenant };
      })()),
  };

  const results: ScenarioResult[] = [];
  for (const s of selected) {
    if (shutdownSignal.aborted) break;
    console.log(`\n▶ ${s.name}: ${s.description}`);
    if (!autovacuum) log(`vacuumed the run tables in ${await vacuumHotTables(databaseUrl)} ms`);
    const t0 = performance.now();
    // Bound on the whole scenario, whatever happens inside it.
    const watchdog = new AbortController();
    const limitMs = (args.quick ? 6 : 12) * 60_000;
    const timer = setTimeout(() => watchdog.abort(new Error(`${s.name} exceeded ${limitMs / 60_000} min`)), limitMs);
    try {
      const signal = AbortSignal.any([shutdownSignal, watchdog.signal]);
      // Every request in flight listens to it.
      setMaxListeners(1_000_000, signal);
      const out = await s.run({ ...ctx, signal });
      if (watchdog.signal.aborted) throw watchdog.signal.reason;
      results.push({ name: s.name, description: s.description, ...out, durationS: round((performance.now() - t0) / 1000, 1)! });
    } catch (err) {
      if (shutdownSignal.aborted) break;
      const e = err as Error;
      console.error(`  ${s.name} failed: ${e.stack ?? e.message}`);
      results.push({ name: s.name, description: s.description, metrics: [], details: {}, error: e.message, durationS: round((performance.now() - t0) / 1000, 1)! });
    } finally {
      clearTimeout(timer);
    }
    console.log(`  done in ${results.at(-1)?.durationS ?? "?"} s`);
    // The shared stack must not idle (and add noise) under the scenarios that start their own.
    if (shared && !selected.slice(selected.indexOf(s) + 1).some((x) => x.sharedStack)) {
      await shared.then((x) => x.bench.stop(), () => {});
      shared = null;
    }
  }
  if (shared) await shared.then((s) => s.bench.stop(), () => {});
  // Interrupted: the cleanups still under way finish and the signal's exit code ends the
  // process (see exitAfterCleanups); no second probe, no results.
  if (shutdownSignal.aborted) return;

  const speedProbe = { before: speedBefore, after: await probeSpeed() };
  const totalS = round((Date.now() - stamp) / 1000, 1);
  console.log(`\nResults (${totalS} s${args.quick ? ", quick" : ""}); ratio = measured / baseline\n`);
  printTable(results);
  console.log(`\nmachine speed probe: before ${showProbe(speedProbe.before)}; after ${showProbe(speedProbe.after)}`);
  const profiles = profileDir ? summarizeProfiles(profileDir) : undefined;
  if (profiles) console.log(`\n${profiles.text}`);
  const file = writeResults(RESULTS_DIR, startedAt, { startedAt: startedAt.toISOString(), totalS, args, machine: machine(autovacuum, speedProbe), redisPrefix, warmups, results, profiles: profiles?.summary });
  console.log(`\nwritten ${path.relative(process.cwd(), file)}`);
  const misses = results.flatMap((r) => (r.error ? [r.name] : r.metrics.filter((m) => m.pass === false).map((m) => `${r.name}: ${m.name}`)));
  console.log(misses.length ? `${misses.length} target(s) missed` : "every target met");
  // A missed target fails the command, so that a script or CI job can tell.
  if (misses.length) process.exitCode = 1;
}

main()
  .catch((err) => {
    console.error((err as Error).message);
    process.exitCode = 1;
  })
  // Awaits the same cleanups as the signal handler when interrupted, so neither exit cuts them short.
  .finally(exitAfterCleanups);
