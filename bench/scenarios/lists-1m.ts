import pg from "pg";
import { request } from "undici";
import { warmupSeconds } from "../lib/args";
import { scaled, type BenchContext, type Scenario } from "../lib/context";
import { benchDatabaseUrl, prepareDatabase } from "../lib/env";
import { createListsKey, explainLists, MESSAGES_TASK, seedLists, TASK_COUNT } from "../lib/lists-data";
import { load, type LoadResult } from "../lib/load";
import { sleep } from "../lib/pool";
import { pidsByComm, withCpu } from "../lib/procfs";
import { profileWindow } from "../lib/profile";
import { info, judged, type Metric } from "../lib/report";
import { startBenchStack } from "../lib/stack";
import { round } from "../lib/stats";

/** One GET with a short timeout: status and parsed body, to check an endpoint exists and answers sensibly. */
async function probe(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<{ status: number; body: any }> {
  const res = await request(url, { headers, signal, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const text = await res.body.text();
  try {
    return { status: res.statusCode, body: JSON.parse(text) };
  } catch {
    return { status: res.statusCode, body: text.slice(0, 200) };
  }
}

/** CPU time per request of each process group (ms), from /proc, over one load window. */
type CpuPerRequest = Record<string, number>;

function listMetrics(label: string, r: LoadResult | null, base: LoadResult, why: string | null, cpu?: CpuPerRequest): Metric[] {
  if (!r) return [{ name: `${label} p99`, unit: "ms", value: null, target: "≤ 10", pass: false, note: why ?? "not measured" }];
  if (r.connections === 1) {
    // One request at a time: the endpoint's own latency at 1,000,000 tasks, without queueing.
    return [
      info({ name: `${label} p50, 1 connection`, unit: "ms", value: round(r.latency.p50), baseline: round(base.latency.p50) }),
      judged({ name: `${label} p99, 1 connection`, unit: "ms", value: round(r.latency.p99), baseline: round(base.latency.p99), note: `one request at a time; baseline GET /healthz the same way` }, 10, false, { baselineBound: true }),
      judged({ name: `${label} non-2xx + errors, 1 connection`, unit: "", value: r.non2xx + r.errors, baseline: base.non2xx + base.errors }, 0),
    ];
  }
  const cpuMetrics = Object.entries(cpu ?? {}).map(([group, ms]) => info({ name: `${label} CPU per request: ${group}`, unit: "ms", value: round(ms, 3) }));
  return [
    info({ name: `${label} p50, 10 connections`, unit: "ms", value: round(r.latency.p50), baseline: round(base.latency.p50) }),
    judged({ name: `${label} p99, 10 connections`, unit: "ms", value: round(r.latency.p99), baseline: round(base.latency.p99), note: `autocannon histogram p99 ${r.autocannonP99} ms; baseline GET /healthz p99 ${base.autocannonP99} ms` }, 10, false, { baselineBound: true }),
    info({ name: `${label} req/s, 10 connections`, unit: "req/s", value: round(r.rps, 0), baseline: round(base.rps, 0) }),
    judged({ name: `${label} non-2xx + errors, 10 connections`, unit: "", value: r.non2xx + r.errors, baseline: base.non2xx + base.errors }, 0),
    ...cpuMetrics,
  ];
}

/** GET /api/tasks and GET /api/messages with 1,000,000 tasks in the database, under autocannon. */
export const lists1m: Scenario = {
  name: "lists-1m",
  description: "GET /api/tasks and GET /api/messages?task_id=… with 1,000,000 tasks, autocannon with 10 connections and with 1: p99 ≤ 10 ms; EXPLAIN plans use indexes",
  async run(ctx: BenchContext) {
    const databaseUrl = benchDatabaseUrl("agentrun_bench_lists");
    await prepareDatabase(databaseUrl);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    let bench: Awaited<ReturnType<typeof startBenchStack>> | null = null;
    try {
      ctx.log(`seeding ${TASK_COUNT} tasks if missing (done once per database)`);
      const seed = await seedLists(client);
      ctx.log(seed.tasksSeeded || seed.messagesSeeded ? `seeded in ${round(seed.seedMs / 1000, 1)} s` : "already seeded");
      const headers = await createListsKey(client);
      bench = await startBenchStack({ databaseUrl, redisPrefix: ctx.redisPrefix, workers: 0, workerConcurrency: 1, memory: false, profileDir: ctx.profileDir && `${ctx.profileDir}/lists-1m` });
      const gw = bench.stack.gatewayUrl;
      const endpoints = [
        { label: "GET /api/tasks", url: `${gw}/api/tasks`, check: (b: any) => Array.isArray(b?.tasks) && b.tasks.length === 20 },
        { label: "GET /api/messages", url: `${gw}/api/messages?task_id=${MESSAGES_TASK}`, check: (b: any) => Array.isArray(b?.messages) && b.messages.length > 0 },
      ];
      const durationS = scaled(ctx, 10, 3);
      const opts = { headers, connections: 10, durationS, maxRequests: 2_000_000, signal: ctx.signal };
      const single = { ...opts, connections: 1, durationS: scaled(ctx, 5, 2) };
      const warm = { ...opts, durationS: 1 };
      // A gateway started seconds ago is still compiling its hot code (see bench/lib/warmup.ts).
      const warmupS = warmupSeconds(ctx.args);
      if (warmupS > 0) {
        ctx.log(`warming the gateway up: ${warmupS} s of both endpoints at 10 connections, not measured`);
        for (const e of endpoints) await load(e.url, { ...opts, durationS: warmupS / endpoints.length });
      }
      ctx.log(`baseline: GET /healthz, 10 connections, ${durationS} s, then 1 connection, ${single.durationS} s`);
      await load(`${gw}/healthz`, warm);
      const base = await load(`${gw}/healthz`, opts);
      const baseSingle = await load(`${gw}/healthz`, single);
      const metrics: Metric[] = [];
      const details: Record<string, unknown> = { seed, baseline: base };
      for (const e of endpoints) {
        const p = await probe(e.url, headers, ctx.signal);
        let why: string | null = null;
        if (p.status !== 200) why = `HTTP ${p.status} ${JSON.stringify(p.body).slice(0, 120)}${p.status === 404 ? " (endpoint not implemented yet?)" : ""}`;
        else if (!e.check(p.body)) why = `unexpected body ${JSON.stringify(p.body).slice(0, 120)}`;
        // The page's total comes from the trigger-kept counts: it must be the exact count.
        if (e.label === "GET /api/tasks" && p.status === 200) metrics.push({ name: "GET /api/tasks total", unit: "tasks", value: p.body?.total ?? null, target: `= ${TASK_COUNT}`, pass: p.body?.total === TASK_COUNT });
        let r: LoadResult | null = null;
        let cpu: CpuPerRequest | undefined;
        if (!why) {
          ctx.log(`${e.label}: 10 connections, ${durationS} s`);
          await load(e.url, warm);
          const stopProfile = profileWindow(bench, ctx.profileDir, `lists-1m ${e.label.replaceAll("/", "_")}`);
          const gatewayPid = bench.gatewayPid;
          const procs = { gateway: () => [gatewayPid], PostgreSQL: () => pidsByComm("postgres"), Redis: () => pidsByComm("redis-server"), "load generator": () => [process.pid] };
          const measured = await withCpu(procs, () => load(e.url, opts));
          await stopProfile();
          r = measured.value;
          if (r.requests > 0) {
            cpu = Object.fromEntries(Object.entries(measured.cpuS).map(([k, v]) => [k, (v * 1000) / r!.requests]));
            cpu["whole machine"] = (measured.machine.busy * 1000) / r.requests;
          }
        } else ctx.log(`${e.label}: skipped: ${why}`);
        details[e.label] = r ?? { skipped: why };
        metrics.push(...listMetrics(e.label, r, base, why, cpu));
        if (r) {
          ctx.log(`${e.label}: 1 connection, ${single.durationS} s`);
          const one = await load(e.url, single);
          details[`${e.label}, 1 connection`] = one;
          metrics.push(...listMetrics(e.label, one, baseSingle, null));
        }
        await sleep(200, ctx.signal);
      }
      const plans = await explainLists(client);
      for (const p of plans) {
        ctx.log(`EXPLAIN ${p.name}: ${p.sql}\n${p.plan.map((l) => `      ${l}`).join("\n")}`);
        if (!p.gateway) metrics.push(info({ name: `EXPLAIN ${p.name} (not run by the gateway)`, unit: "ms", value: p.executionMs, note: `what an exact count would cost: ${p.scans.join("; ")}` }));
        else metrics.push({ name: `EXPLAIN ${p.name} uses indexes`, unit: "ms", value: p.executionMs, target: "index scans", pass: p.usesIndex, note: p.scans.join("; ") });
      }
      details.plans = plans;
      return { metrics, details };
    } finally {
      await bench?.stop();
      await client.end();
    }
  },
};
