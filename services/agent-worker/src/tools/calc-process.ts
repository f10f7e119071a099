import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

/**
 * Starts one calc process (calc-thread.ts) with its limits. Its heap is V8's old generation of
 * `maxHeapMb`; an allocation past it makes V8 abort the process, which then writes no core dump
 * (a shell lowers the limit before it execs Node: Node has no setrlimit), as a core of the heap
 * would be hundreds of megabytes per expression. The process bounds each evaluation itself to
 * `evaluationLimitMs` (the parent stops it sooner; this limit is for a parent that died without a
 * word, so that nothing computes on, orphaned). Its environment is empty: an expression that
 * escaped mathjs would find none of the worker's keys and tokens.
 */
export function spawnCalcProcess(limits: { maxHeapMb: number; evaluationLimitMs: number }): ChildProcess {
  const node = [
    process.execPath,
    // TypeScript through tsx's require hook, like the services themselves.
    "--require",
    require.resolve("tsx/cjs"),
    `--max-old-space-size=${limits.maxHeapMb}`,
    `--max-semi-space-size=${Math.max(1, Math.min(16, Math.floor(limits.maxHeapMb / 4)))}`,
    path.join(__dirname, "calc-thread.ts"),
    String(limits.evaluationLimitMs),
  ];
  const stdio: ["ignore", "ignore", "pipe", "ipc"] = ["ignore", "ignore", "pipe", "ipc"];
  if (process.platform === "win32") return spawn(node[0]!, node.slice(1), { env: {}, stdio });
  // (What the shell itself exports is not handed on: dash sets PWD, bash SHLVL and OLDPWD too.)
  return spawn("/bin/sh", ["-c", 'ulimit -c 0; unset PWD OLDPWD SHLVL; exec "$0" "$@"', ...node], { env: {}, stdio });
}
