import { setMaxListeners } from "node:events";
import { performance } from "node:perf_hooks";
import { onCleanup } from "../lib/cleanup";
import { scaled, type Scenario } from "../lib/context";
import { benchDatabaseUrl, dropDatabase, freshDatabase } from "../lib/env";
import { closedLoop, sleep } from "../lib/pool";
import { cpuSeconds, fdLimit, openFds, raiseFdLimit, rssBytes } from "../lib/procfs";
import { profileWindow } from "../lib/profile";
import { info, judged } from "../lib/report";
import { createDispatcher, holdStream, type HeldStream } from "../lib/sse";
import { benchTenant, startBenchStack } from "../lib/stack";
import { round } from "../lib/stats";

const MiB = 1024 * 1024;
const WANTED_FDS = 65_536;

/** Runs the streams are spread over: each has a channel subscription and checks of its own. */
const HANGING_RUNS = 100;

/**
 * 10,000 idle SSE streams on one gateway process. A hundred runs hang (the model never answers)
 * and the streams follow them, a hundred each, through `GET /api/tasks/{id}/runs/{run_id}/events`;
 * where that endpoint does not exist yet, each stream is its own `POST /api/run` with `[hang]`.
 */
export const idle10k: Scenario = {
  name: "idle-10k",
  description: "10,000 idle open SSE streams on one gateway: gateway RSS before/after; target < 1 GiB",
  async run(ctx) {
    const wanted = ctx.args.idleStreams;
    const selfFds = raiseFdLimit(process.pid, WANTED_FDS);
    // A database of its own, dropped afterwards: its thousands of hanging runs must not outlive it.
    const databaseUrl = benchDatabaseUrl("agentrun_bench_idle");
    await freshDatabase(databaseUrl);
    const dropDb = onCleanup("idle database", () => dropDatabase(databaseUrl));
    const bench = await startBenchStack({
      databaseUrl,
      redisPrefix: ctx.redisPrefix,
      workers: 1,
      workerConcurrency: ctx.args.workerConcurrency,
      // The hanging run must stay open for the whole scenario.
      workerEnv: { MODEL_IDLE_TIMEOUT_MS: "600000", MODEL_TIMEOUT_MS: "600000" },
      profileDir: ctx.profileDir && `${ctx.profileDir}/idle-10k`,
    });
    const hold = new AbortController();
    const signal = AbortSignal.any([ctx.signal, hold.signal]);
    setMaxListeners(1_000_000, signal);
    const dispatcher = createDispatcher({ idle: true });
    const streams: HeldStream[] = [];
    try {
      const gwFds = raiseFdLimit(bench.gatewayPid, WANTED_FDS);
      const target = Math.min(wanted, Math.floor(Math.min(selfFds, gwFds) - 1000));
      const tenant = await benchTenant(bench.prisma);
      const url = bench.stack.gatewayUrl;

      const hanging = Math.max(1, Math.min(HANGING_RUNS, ctx.args.workerConcurrency));
      const eventsUrls: string[] = [];
      for (let i = 0; i < hanging; i++) {
        const held = holdStream(`${url}/api/run`, { headers: tenant.headers, body: { query: `[hang] idle benchmark ${i}`, stream: true }, dispatcher, signal });
        streams.push(held);
        const started = await held.ready;
        if (!started.ok || started.data?.type !== "run_started") throw new Error(`a hanging run did not start: ${started.error ?? JSON.stringify(started.data)}`);
        eventsUrls.push(`${url}/api/tasks/${started.data.task_id}/runs/${started.data.run_id}/events`);
      }
      const eventsUrl = eventsUrls[0]!;

      const probeAbort = new AbortController();
      const probe = holdStream(eventsUrl, { headers: tenant.headers, dispatcher, signal: AbortSignal.any([signal, probeAbort.signal]) });
      const probed = await Promise.race([probe.ready, sleep(5000).then(() => ({ ok: false, error: "no event within 5 s" }) as const)]);
      probeAbort.abort();
      await probe.ended;
      const mode = probed.ok ? "events" : "post-hang";
      ctx.log(
        mode === "events"
          ? `opening ${target} GET …/runs/{run_id}/events streams over ${hanging} hanging runs`
          : `events endpoint not available (${probed.error?.slice(0, 80)}): opening ${target} POST /api/run [hang] streams instead`,
      );

      await sleep(1000, ctx.signal);
      const rssBefore = rssBytes(bench.gatewayPid);
      const fdsBefore = openFds(bench.gatewayPid);
      let opened = 0;
      let failed = 0;
      let dropped = 0;
      const failures = new Map<string, number>();
      const t0 = performance.now();
      const progress = setInterval(() => ctx.log(`  ${opened} open, ${failed} failed, ${round((performance.now() - t0) / 1000, 0)} s`), 15_000);
      await closedLoop({
        concurrency: 200,
        maxCount: target,
        durationMs: scaled(ctx, 240_000, 180_000),
        signal: ctx.signal,
        fn: async (i) => {
          const own = new AbortController();
          const s =
            mode === "events"
              ? holdStream(eventsUrls[i % hanging]!, { headers: tenant.headers, dispatcher, signal: AbortSignal.any([signal, own.signal]) })
              : holdStream(`${url}/api/run`, { headers: tenant.headers, body: { query: `[hang] idle stream ${i}`, stream: true }, dispatcher, signal: AbortSignal.any([signal, own.signal]) });
          streams.push(s);
          const r = await Promise.race([s.ready, sleep(30_000).then(() => ({ ok: false, error: "no first event within 30 s" }))]);
          if (r.ok) {
            opened++;
            void s.ended.then(() => {
              if (!signal.aborted) dropped++;
            });
          } else {
            failed++;
            failures.set(r.error ?? "?", (failures.get(r.error ?? "?") ?? 0) + 1);
            own.abort();
          }
        },
      });
      clearInterval(progress);
      const openMs = performance.now() - t0;
      ctx.log(`${opened} streams open after ${round(openMs / 1000, 1)} s (${failed} failed); holding them`);

      const holdMs = scaled(ctx, 20_000, 5_000);
      const cpu0 = cpuSeconds(bench.gatewayPid);
      const stopProfile = profileWindow(bench, ctx.profileDir, "idle-10k-hold");
      await sleep(holdMs, ctx.signal);
      await stopProfile();
      const idleCpu = (cpuSeconds(bench.gatewayPid) - cpu0) / (holdMs / 1000);
      const rssAfter = rssBytes(bench.gatewayPid);
      const fdsAfter = openFds(bench.gatewayPid);
      return {
        metrics: [
          judged({ name: "streams open", unit: "", value: opened - dropped, note: target < wanted ? `capped at ${target} by the open-files limit (self ${selfFds}, gateway ${gwFds}); raise it with ulimit -n` : undefined }, wanted, true),
          info({ name: "gateway RSS before", unit: "MiB", value: round(rssBefore / MiB, 1) }),
          judged({ name: "gateway RSS with streams open", unit: "MiB", value: round(rssAfter / MiB, 1), baseline: round(rssBefore / MiB, 1), note: `mode ${mode}: ${mode === "events" ? `GET /api/tasks/{id}/runs/{run_id}/events on ${hanging} hanging runs` : "POST /api/run [hang] per stream (events endpoint missing)"}` }, 1024, false, { baselineBound: true }),
          info({ name: "gateway RSS per stream", unit: "KiB", value: opened ? round((rssAfter - rssBefore) / 1024 / opened, 1) : null }),
          info({ name: "time to open all streams", unit: "s", value: round(openMs / 1000, 1) }),
          info({ name: "gateway CPU while idle", unit: "% core", value: round(idleCpu * 100, 1) }),
          judged({ name: "streams dropped while idle", unit: "", value: dropped }, 0),
        ],
        details: { mode, wanted, target, opened, failed, dropped, failures: Object.fromEntries(failures), fdLimits: { self: selfFds, gateway: gwFds, selfNow: fdLimit() }, gatewayFds: { before: fdsBefore, after: fdsAfter }, rssBefore, rssAfter, openMs, holdMs, idleCpuCores: idleCpu, logs: failed || dropped ? bench.logTail() : undefined },
      };
    } finally {
      hold.abort();
      await Promise.race([Promise.all(streams.map((s) => s.ended)), sleep(15_000)]);
      await dispatcher.destroy().catch(() => {});
      await bench.stop();
      await dropDatabase(databaseUrl);
      dropDb();
    }
  },
};
