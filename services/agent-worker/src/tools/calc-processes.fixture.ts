import { readdirSync, readFileSync } from "node:fs";

/**
 * The calc processes whose parent is `parentPid`, read from /proc as any observer of the machine
 * could: nothing in the processes helps. Their `environ` is the environment they started with.
 */
export function calcProcesses(parentPid = process.pid): { pid: number; environ: string[]; limits: string }[] {
  const found: { pid: number; environ: string[]; limits: string }[] = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== parentPid || !readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("calc-thread")) continue;
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter((v) => v !== "");
      found.push({ pid: Number(pid), environ, limits: readFileSync(`/proc/${pid}/limits`, "utf8") });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Whether process `pid` still exists (a zombie counts as gone). */
export function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}
