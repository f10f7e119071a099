/** Redis names of one run's event log and channel, and of the worker control channel. */
export const runChannel = (prefix: string, runId: string) => `${prefix}:run:${runId}:events`;
/** Redis list holding every event a worker emitted for the run, until PostgreSQL has them all. */
export const runLogKey = (prefix: string, runId: string) => `${prefix}:run:${runId}:log`;
/** Token of the one writer whose events the run's log takes, once someone other than its worker ends the run (see run-log-append). */
export const runWriterKey = (prefix: string, runId: string) => `${prefix}:run:${runId}:writer`;
/** Set when a run must stop; its worker reads it when it claims the run, with each heartbeat and after its subscriber reconnects. */
export const runCancelKey = (prefix: string, runId: string) => `${prefix}:run:${runId}:cancel`;
/**
 * Lifetime of a run's cancel flag: longer than a run waits for a worker (a run queued for more
 * than QUEUED_MAX_AGE_MS, an hour by default, is ended unstarted), so that a run cancelled while
 * every worker was down still ends `cancelled` when one takes it over.
 */
export const RUN_CANCEL_FLAG_TTL_S = 24 * 3600;
/** Refreshed by the worker executing the run; its absence means the worker is gone. */
export const runHeartbeatKey = (prefix: string, runId: string) => `${prefix}:run:${runId}:hb`;
/** Broadcast to every worker: `{"type":"cancel","run_id":…}`. */
export const controlChannel = (prefix: string) => `${prefix}:control`;
/** Sorted set of live worker processes, scored by their last heartbeat (ms); read by /readyz. */
export const workersKey = (prefix: string) => `${prefix}:workers`;
/** A worker whose heartbeat is older than this counts as gone. */
export const WORKER_HEARTBEAT_STALE_MS = 15_000;

/** The run log outlives the run by this long, for readers that attach right after the end. */
export const RUN_LOG_TTL_AFTER_END_S = 3600;
/** Safety TTL of a live run log, refreshed as events arrive. */
export const RUN_LOG_TTL_LIVE_S = 24 * 3600;
