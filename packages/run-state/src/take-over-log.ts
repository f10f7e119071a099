import { giveBackRunWriter, RUN_LOG_TTL_AFTER_END_S, RUN_LOG_TTL_LIVE_S, runWriterKey, takeOverRunWriter, type EventStore } from "@agentrun/events";
import { withRetry } from "./with-retry";

/**
 * How many seqs are left out before the terminal event of a run (numbered this + 1 past the last
 * event stored) when Redis lost the run's state since its worker's last append (or its claim):
 * that worker may have published events that neither store holds (it died before storing them,
 * at most about a flush interval's worth while PostgreSQL is up), which clients following the run
 * received. A terminal event that reused one of their seqs would be dropped as a repeat by such a
 * client; past them, it comes after a gap that readers skip once the run has ended. (A client
 * holding even more events gets the terminal event out of order: see followRun.)
 */
export const LOST_LOG_SEQ_GAP = 1000;

/** How long a take-over retries the run's writer key while Redis is unreachable. */
const TAKE_OVER_REDIS_RETRY_MS = 10_000;

/** How long the writer key is tried to be given back after a take-over of it failed. */
const GIVE_BACK_MS = 3000;

/**
 * Makes `token` the only writer of the run's log, and tells whether Redis lost the run's state
 * since its worker's last append (see {@link LOST_LOG_SEQ_GAP}). If Redis stays unreachable or
 * does not answer, the run is given back to `previous` before the error is thrown: half taken
 * over, its worker's batches and end would be refused while its appends went on (PostgreSQL
 * taken), or its appends refused and nobody left to end the run (a take-over of the log whose
 * answer was lost, though Redis carried it out). The log is given back only if this take-over
 * holds it.
 */
export async function takeOverLog(deps: EventStore, runId: string, token: string, previous: string | null): Promise<boolean> {
  const key = runWriterKey(deps.redisPrefix, runId);
  try {
    // The key is missing though a worker claimed the run: Redis lost it (a restart), and the
    // run's log with it. (Our own token: a retry after an answer lost, taken as it was.)
    const holder = await withRetry(TAKE_OVER_REDIS_RETRY_MS, () => takeOverRunWriter(deps.redis, key, token, RUN_LOG_TTL_AFTER_END_S));
    return holder === null && previous !== null;
  } catch (err) {
    // Sent after the take-over on the same connection, so Redis carries it out after it. Tried
    // again whatever the error: a give-back that timed out is still carried out, and harmless twice.
    await withRetry(GIVE_BACK_MS, () => giveBackRunWriter(deps.redis, key, token, previous, RUN_LOG_TTL_LIVE_S), () => true).catch(() => {});
    await deps.prisma.$executeRaw`UPDATE runs SET worker_id = ${previous} WHERE id = ${runId} AND worker_id = ${token}`.catch(() => {});
    throw err;
  }
}

/**
 * After an end that failed following a take-over that found the run's writer key missing: the
 * key goes again (if this taker still holds it), so that the next taker (a later sweep, a worker
 * taking the stalled job over) also learns that Redis lost the run's state, rather than finding
 * this taker's token and numbering its terminal event among seqs that clients hold.
 */
export async function forgetLogTakeOver(deps: EventStore, runId: string, token: string): Promise<void> {
  await giveBackRunWriter(deps.redis, runWriterKey(deps.redisPrefix, runId), token, null, RUN_LOG_TTL_LIVE_S).catch(() => {});
}
