/**
 * Everything the harness started registers how to stop it here. Ctrl-C (SIGINT) or SIGTERM
 * aborts every request loop through {@link shutdownSignal}, runs the cleanups in reverse order
 * and exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as a shell reports
 * a process killed by it; a second signal kills the registered processes at once.
 */
import os from "node:os";

const cleanups: { name: string; fn: () => Promise<void> }[] = [];
const pids = new Set<number>();
const controller = new AbortController();
/** The pass over the cleanups under way: every caller of {@link runCleanups} awaits the same one. */
let running: Promise<void> | null = null;
let interruptedBy: NodeJS.Signals | null = null;

/** Aborted when the harness is interrupted: every loop and request listens to it. */
export const shutdownSignal: AbortSignal = controller.signal;

/** Registers `fn`; returns the function that unregisters it (call it after a normal stop). */
export function onCleanup(name: string, fn: () => Promise<void>): () => void {
  const entry = { name, fn };
  cleanups.push(entry);
  return () => {
    const i = cleanups.indexOf(entry);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

/** Processes to SIGKILL if the harness is interrupted twice. */
export function trackPid(pid: number | undefined): void {
  if (pid) pids.add(pid);
}

/**
 * Runs every registered cleanup, last registered first, each once. A call while a pass is under
 * way returns that pass, so it resolves only when every cleanup has ended, not when the list is
 * merely empty (the pass takes each entry off before running it). A failed cleanup is reported
 * and the others still run.
 */
export function runCleanups(): Promise<void> {
  // Forgotten once settled, also when it settles at once (nothing registered): the next call
  // runs what was registered since.
  running ??= drainCleanups().finally(() => void (running = null));
  return running;
}

async function drainCleanups(): Promise<void> {
  while (cleanups.length) {
    const { name, fn } = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`cleanup ${name} failed: ${(err as Error).message}\n`);
    }
  }
}

/** The exit code of a process ended by `signal`: 128 + its number (SIGINT 130, SIGTERM 143). */
export const signalExitCode = (signal: NodeJS.Signals): number => 128 + os.constants.signals[signal];

/**
 * Runs the cleanups, then exits: with {@link signalExitCode} of the signal if the harness was
 * interrupted (whatever the run itself set), else with `process.exitCode` (0 when unset). Exiting
 * is what ends libraries' open handles (pools, timers) that would keep a finished run alive.
 */
export async function exitAfterCleanups(): Promise<never> {
  await runCleanups();
  process.exit(interruptedBy ? signalExitCode(interruptedBy) : (process.exitCode ?? 0));
}

export function installSignalHandlers(): void {
  const onSignal = (signal: NodeJS.Signals) => {
    if (interruptedBy) {
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* already gone */
        }
      }
      process.exit(signalExitCode(interruptedBy));
    }
    interruptedBy = signal;
    process.stderr.write(`\n${signal}: stopping everything the benchmark started (again to kill at once)\n`);
    controller.abort(new Error(`interrupted by ${signal}`));
    void exitAfterCleanups();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}
