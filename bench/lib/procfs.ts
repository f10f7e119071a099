import { spawnSync } from "node:child_process";
import fs from "node:fs";

let ticks: number | null = null;

/** Clock ticks per second of /proc CPU times (`getconf CLK_TCK`, usually 100). */
export function clockTicks(): number {
  if (ticks === null) {
    const out = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim();
    ticks = Number(out) > 0 ? Number(out) : 100;
  }
  return ticks;
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after "pid (comm)".
  return (Number(fields[11]) + Number(fields[12])) / clockTicks();
}

/** Resident set size of a process in bytes, from VmRSS in /proc/<pid>/status. */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** Open file descriptors of a process. */
export function openFds(pid: number): number {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return NaN;
  }
}

/**
 * Whole-machine CPU seconds, busy and total, from the `cpu` line of /proc/stat: user, nice,
 * system, idle, iowait, irq, softirq, steal (guest time is counted in user and nice already).
 * Steal, the time the hypervisor gave this VM's CPUs to others, is not busy.
 */
export function machineCpuOf(statLine: string): { busy: number; total: number } {
  const v = statLine.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const notBusy = (v[3] ?? 0) + (v[4] ?? 0) + (v[7] ?? 0);
  return { busy: (total - notBusy) / clockTicks(), total: total / clockTicks() };
}

function machineCpu(): { busy: number; total: number } {
  return machineCpuOf(fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!);
}

/** The soft limit on open files of a process, from /proc/<pid>/limits. */
export function fdLimit(pid: number | "self" = "self"): number {
  const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync(`/proc/${pid}/limits`, "utf8"));
  return !m ? NaN : m[1] === "unlimited" ? Infinity : Number(m[1]);
}

/**
 * Raises a running process's open-files limit with `prlimit` (util-linux; needs root or
 * CAP_SYS_RESOURCE to go above the hard limit). Returns the limit in force afterwards.
 */
export function raiseFdLimit(pid: number, wanted: number): number {
  if (fdLimit(pid) >= wanted) return fdLimit(pid);
  spawnSync("prlimit", ["--pid", String(pid), `--nofile=${wanted}:${wanted}`], { stdio: "ignore" });
  return fdLimit(pid);
}

/** Processes whose command name (/proc/<pid>/comm) is one of `names`, e.g. postgres, redis-server. */
export function pidsByComm(...names: string[]): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (names.includes(fs.readFileSync(`/proc/${d}/comm`, "utf8").trim())) out.push(Number(d));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

type CpuSample = Record<string, Map<number, number>>;

/** CPU seconds of each process of each group (groups are re-listed each time: backends come and go). */
function sampleCpu(groups: Record<string, () => number[]>): CpuSample {
  const out: CpuSample = {};
  for (const [name, list] of Object.entries(groups)) {
    const m = new Map<number, number>();
    for (const pid of list()) {
      try {
        m.set(pid, cpuSeconds(pid));
      } catch {
        /* exited meanwhile */
      }
    }
    out[name] = m;
  }
  return out;
}

/** CPU seconds used by each group between two samples (processes that exited in between are not counted). */
function cpuDelta(before: CpuSample, after: CpuSample): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, m] of Object.entries(after)) {
    let sum = 0;
    for (const [pid, s] of m) sum += s - (before[name]?.get(pid) ?? 0);
    out[name] = sum;
  }
  return out;
}

export interface CpuUse {
  /** CPU seconds of each group. */
  cpuS: Record<string, number>;
  /** CPU seconds the whole machine was busy, and its capacity (seconds × cores) in the same time. */
  machine: { busy: number; total: number };
}

/** Starts counting the CPU seconds each group and the whole machine use; the function returned stops. */
export function startCpu(groups: Record<string, () => number[]>): () => CpuUse {
  const cpu0 = sampleCpu(groups);
  const m0 = machineCpu();
  return () => {
    const m1 = machineCpu();
    return { cpuS: cpuDelta(cpu0, sampleCpu(groups)), machine: { busy: m1.busy - m0.busy, total: m1.total - m0.total } };
  };
}

/** What `fn` returned, and the CPU seconds each group and the whole machine used while it ran. */
export async function withCpu<T>(groups: Record<string, () => number[]>, fn: () => Promise<T>): Promise<CpuUse & { value: T }> {
  const stop = startCpu(groups);
  const value = await fn();
  return { value, ...stop() };
}
