import fs from "node:fs";
import path from "node:path";
import type { BenchStack } from "./stack";

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  file: string;
  /** Sampled time without (idle), in ms. */
  busyMs: number;
  /** Self time by module (npm package, node internals, project package), share of busy time. */
  byModule: { module: string; ms: number; share: number }[];
  /** Self time by function. */
  topFunctions: { fn: string; ms: number; share: number }[];
}

/** Where a frame's code lives: npm package, project package/service, node internals, or a V8 pseudo-frame. */
function moduleOf(url: string, fn: string): string {
  if (!url) return fn.startsWith("(") ? fn : "(native)";
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  const own = /\/(packages|services)\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  return path.basename(url);
}

function summarizeOne(file: string): ProfileSummary {
  const p = JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  // The profiler's own work (stopping and serializing the profile) is not the service's.
  const excluded = new Set<number>();
  const exclude = (id: number) => {
    excluded.add(id);
    for (const c of byId.get(id)?.children ?? []) exclude(c);
  };
  for (const n of p.nodes) if (n.callFrame.url.includes("cpu-profile-preload")) exclude(n.id);
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000));
  const mods = new Map<string, number>();
  const fns = new Map<string, number>();
  let busy = 0;
  for (const [id, ms] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === "(idle)" || excluded.has(id)) continue;
    busy += ms;
    const mod = moduleOf(url, functionName);
    mods.set(mod, (mods.get(mod) ?? 0) + ms);
    const key = `${functionName || "(anonymous)"} ${mod}${url ? `:${lineNumber + 1}` : ""}`;
    fns.set(key, (fns.get(key) ?? 0) + ms);
  }
  const top = (m: Map<string, number>, n: number) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
  return {
    file,
    busyMs: Math.round(busy),
    byModule: top(mods, 12).map(([module, ms]) => ({ module, ms: Math.round(ms), share: Math.round((ms / busy) * 1000) / 10 })),
    topFunctions: top(fns, 15).map(([fn, ms]) => ({ fn, ms: Math.round(ms), share: Math.round((ms / busy) * 1000) / 10 })),
  };
}

function findProfiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? findProfiles(p) : e.name.endsWith(".cpuprofile") ? [p] : [];
  });
}

/** Summaries of every .cpuprofile under `dir`. */
export function summarizeProfiles(dir: string): { summary: ProfileSummary[]; text: string } {
  const summary = findProfiles(dir).map(summarizeOne);
  const lines = [`CPU profiles (${dir}):`];
  for (const s of summary) {
    lines.push(`\n${path.relative(dir, s.file)}: ${s.busyMs} ms busy`);
    lines.push(`  by module: ${s.byModule.map((m) => `${m.module} ${m.share}%`).join(", ")}`);
    for (const f of s.topFunctions) lines.push(`  ${String(f.share).padStart(5)}%  ${f.fn}`);
  }
  if (summary.length === 0) lines.push("  none found");
  return { summary, text: lines.join("\n") };
}

/**
 * Profiles the gateway and the workers of `bench` from now until the returned function is
 * called (SIGUSR2 to start and stop, see cpu-profile-preload.cjs); their profiles are then moved
 * to <root>/<label>/<role>-<pid>.cpuprofile. A no-op without --profile.
 */
export function profileWindow(bench: BenchStack, root: string | undefined, label: string): () => Promise<void> {
  const dirs = bench.profileDirs;
  if (!root || !dirs) return async () => {};
  const targets: [role: "gateway" | "worker", pid: number][] = [["gateway", bench.gatewayPid], ...bench.workerPids.map((p) => ["worker", p] as ["worker", number])];
  const signal = () => targets.forEach(([, pid]) => process.kill(pid, "SIGUSR2"));
  signal();
  return async () => {
    signal();
    const out = path.join(root, label);
    fs.mkdirSync(out, { recursive: true });
    for (const [role, pid] of targets) {
      for (let i = 0; i < 100; i++) {
        const file = fs.existsSync(dirs[role]) ? fs.readdirSync(dirs[role]).find((f) => f.startsWith(`${pid}-`) && f.endsWith(".cpuprofile")) : undefined;
        if (file) {
          fs.renameSync(path.join(dirs[role], file), path.join(out, `${role}-${pid}.cpuprofile`));
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
}
