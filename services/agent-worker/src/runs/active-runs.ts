import { setMaxListeners } from "node:events";
import type { StopReason } from "./run-failure";

/** What a run's execution gets from {@link ActiveRuns}: its stop signal and a way to stop itself. */
export interface RunControl {
  signal: AbortSignal;
  stop(reason: StopReason): void;
  /**
   * Aborted once this process closes (it takes no new runs). A run still waiting to take over
   * from a stopped worker gives its job back then, for another worker (see claimRun).
   */
  closing: AbortSignal;
}

/** The runs this process is executing, each with the controller that stops it. */
export class ActiveRuns {
  private readonly runs = new Map<string, { controller: AbortController; done: Promise<void> }>();
  /** Aborted by close(); every run waiting for a takeover listens to it (no listener cap, see constructor). */
  private readonly closed = new AbortController();
  private stoppedFor: StopReason | undefined;

  constructor() {
    // One listener per run waiting to take another worker's run over, as many as its concurrency.
    setMaxListeners(0, this.closed.signal);
  }

  /**
   * Whether this process takes new runs: not once it closes. BullMQ still hands over a job whose
   * fetch was under way as its worker closed; its processor gives such a job back (see
   * agentRunProcessor) for another worker to run.
   */
  get accepting(): boolean {
    return !this.closed.signal.aborted;
  }

  /** Takes no new runs from now on; those in progress go on. */
  close(): void {
    this.closed.abort();
  }

  /**
   * Executes a run under its own stop signal. When this process is executing the run already
   * (its job was handed out again after its lock lapsed), waits for that execution instead of
   * starting a second one, which would also take the first one's controller out of reach, and
   * ends as it ends: a failure is this delivery's too, so that the job is retried (the first
   * delivery's lock, which would have carried it, has lapsed).
   */
  async execute(runId: string, fn: (control: RunControl) => Promise<void>): Promise<void> {
    const current = this.runs.get(runId);
    if (current) return current.done;
    const controller = new AbortController();
    // Started after stopAll (a job handed over late): stopped as the others were.
    if (this.stoppedFor !== undefined) controller.abort(this.stoppedFor);
    const done = fn({ signal: controller.signal, stop: (reason) => controller.abort(reason), closing: this.closed.signal });
    const entry = { controller, done };
    this.runs.set(runId, entry);
    try {
      await done;
    } finally {
      if (this.runs.get(runId) === entry) this.runs.delete(runId);
    }
  }

  /** Stops one run; returns false when this process is not executing it. */
  stop(runId: string, reason: StopReason): boolean {
    const entry = this.runs.get(runId);
    if (!entry) return false;
    entry.controller.abort(reason);
    return true;
  }

  /** Stops every run in progress, and any started after this. */
  stopAll(reason: StopReason): void {
    this.stoppedFor = reason;
    for (const { controller } of this.runs.values()) controller.abort(reason);
  }

  /** Whether this process is executing the run. */
  has(runId: string): boolean {
    return this.runs.has(runId);
  }

  /** The ids of the runs being executed. */
  ids(): string[] {
    return [...this.runs.keys()];
  }

  get size(): number {
    return this.runs.size;
  }
}
