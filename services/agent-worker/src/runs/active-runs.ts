import type { StopReason } from "./run-failure";

/** The runs this process is executing, each with the controller that stops it. */
export class ActiveRuns {
  private readonly runs = new Map<string, AbortController>();

  start(runId: string): AbortController {
    const c = new AbortController();
    this.runs.set(runId, c);
    return c;
  }

  end(runId: string, c: AbortController): void {
    if (this.runs.get(runId) === c) this.runs.delete(runId);
  }

  /** Stops one run; returns false when this process is not executing it. */
  stop(runId: string, reason: StopReason): boolean {
    const c = this.runs.get(runId);
    if (!c) return false;
    c.abort(reason);
    return true;
  }

  stopAll(reason: StopReason): void {
    for (const c of this.runs.values()) c.abort(reason);
  }

  get size(): number {
    return this.runs.size;
  }
}
