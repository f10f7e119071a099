/**
 * The run event bus: one writer per run (the worker) and any number of readers (gateway
 * streams, replays), over Redis pub/sub plus a per-run Redis log and PostgreSQL.
 */
export * from "./keys";
export { SubscriberHub, type MessageHandler } from "./subscriber-hub";
export { EarlyRunSubscription } from "./early-subscription";
export { RunEventWriter, type RunEventWriterOptions } from "./run-event-writer";
export { giveBackRunWriter, takeOverRunWriter } from "./run-log-append";
export { countLiveWorkers, isWorkerLive, newWorkerId, recordWorkerHeartbeat, WORKER_FORGET_AFTER_MS } from "./worker-registry";
export { followRun, type FollowRunOptions } from "./run-event-reader";
export { readFoundRunEvents, readStoredEvents, readUnstoredEvents, withoutGaps, type EventStore } from "./stored-events";
export { RunGoneError } from "./run-gone";
export { readDbEvents } from "./db-events";
export { removeRunKeys } from "./run-log-removal";
export { releaseRunHeartbeatIfHeld, renewRunHeartbeatIfHeld } from "./run-heartbeat";
