import type { Redis } from "@agentrun/redis";

/**
 * The heartbeats of the runs this process executes, beaten again the moment its Redis command
 * connection is back (ioredis's `ready`), not a renewal interval later.
 *
 * An outage longer than the heartbeat's TTL lets it lapse while the run goes on here; once Redis
 * is back, another worker may be handed the stalled job and set the heartbeat for itself, then
 * waits one renewal interval and a margin for a live owner to set it again (see claimRun). Each
 * connection comes back on its own reconnect schedule (up to 2 s apart); had this worker waited
 * for its next interval as well, a live run could be taken over and ended `worker_lost`.
 */
export class ReconnectBeats {
  private readonly beats = new Map<string, () => void>();

  constructor(redis: Pick<Redis, "on">) {
    redis.on("ready", () => {
      for (const beat of this.beats.values()) beat();
    });
  }

  /** Beats `beat` on each reconnect until the returned function is called. */
  add(runId: string, beat: () => void): () => void {
    this.beats.set(runId, beat);
    return () => {
      if (this.beats.get(runId) === beat) this.beats.delete(runId);
    };
  }

  get size(): number {
    return this.beats.size;
  }
}
