/**
 * Everything the harness started registers how to stop it here. Ctrl-C (SIGINT) or SIGTERM
 * aborts every request loop through {@link shutdownSignal}, then runs the cleanups in reverse
 * order; a second signal kills the registered processes at once.
 */
const cleanups: { name: string; fn: () => Promise<void> }[] = [];
const pids = new Set<number>();
const controller = new AbortController();

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

export async function runCleanups(): Promise<void> {
  while (cleanups.length) {
    const { name, fn } = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`cleanup ${name} failed: ${(err as Error).message}\n`);
    }
  }
}

export function installSignalHandlers(): void {
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* already gone */
        }
      }
      process.exit(130);
    }
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping everything the benchmark started (again to kill at once)\n`);
    controller.abort(new Error(`interrupted by ${signal}`));
    void runCleanups().finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}
