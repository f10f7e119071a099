/**
 * `work`, or a rejection with `signal`'s reason as soon as it aborts, for work that does not
 * watch the signal itself (a DNS lookup; the SDK waiting out a retry's back-off). The work goes
 * on unobserved after an abort: its late rejection is swallowed.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => {});
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
