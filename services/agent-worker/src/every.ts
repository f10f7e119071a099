/**
 * Calls `task` now and then every `everyMs`, never two calls at once: a tick that finds the
 * last call still in progress (a sweep slower than its interval, a database that hangs) is
 * skipped, so slow calls never pile up on each other. `task` handles its own errors: a
 * rejection is dropped. Returns a stop function, after which no call starts.
 */
export function every(everyMs: number, task: () => Promise<unknown>, opts: { now?: boolean } = {}): () => void {
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    void task()
      .catch(() => {})
      .finally(() => (running = false));
  };
  if (opts.now) tick();
  const timer = setInterval(tick, everyMs);
  return () => clearInterval(timer);
}
