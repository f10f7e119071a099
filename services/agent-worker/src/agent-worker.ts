import { hostname } from "node:os";
import type { Logger } from "@agentrun/logger";
import { createPrisma, schemaState, type SchemaState } from "@agentrun/db";
import { closeRedis, createRedis, logConnectionState } from "@agentrun/redis";
import { isUnavailableError } from "@agentrun/errors";
import { controlChannel, newWorkerId, recordWorkerHeartbeat, runCancelKey, workersKey } from "@agentrun/events";
import { AGENT_RUNS_QUEUE, bullPrefix, createRunQueue, createWorker } from "@agentrun/queue";
import { createMemoryClient } from "@agentrun/memory-client";
import { settingsForLog } from "@agentrun/config";
import { z } from "zod";
import type { WorkerConfig } from "./config";
import { agentRunProcessor } from "./jobs/agent-run.job";
import { ReconnectBeats } from "./runs/reconnect-beats";
import { ActiveRuns } from "./runs/active-runs";
import { ModelClients } from "./runs/model-clients";
import { AgentCache } from "./runs/agent-cache";
import type { RunDeps } from "./runs/run-deps";
import { reviveQueuedRuns, sweepOrphanedRuns } from "./runs/sweeper";
import { deleteExpiredIdempotencyKeys } from "./runs/expired-keys-sweep";
import { every } from "./every";
import { endRunOfFailedJob } from "./runs/failed-job";
import { ToolRegistry } from "./tools/registry";

const controlMessage = z.object({ type: z.literal("cancel"), run_id: z.string() });

/**
 * How long closing may take beyond the grace of active runs: stopped runs store their end, then
 * the queue, Redis and the database pool close. A BullMQ worker can wait for ever on a Redis
 * connection that went away, so shutdown never waits longer than grace plus this margin.
 */
export const SHUTDOWN_MARGIN_MS = 5000;

export interface AgentWorker {
  workerId: string;
  /**
   * Stops taking jobs, lets active runs finish for `graceMs`, then stops them and closes every
   * connection. Resolves within `graceMs` + {@link SHUTDOWN_MARGIN_MS}: true when everything
   * closed, false (after logging what did not) when the deadline passed first.
   */
  close(graceMs?: number): Promise<boolean>;
  active: ActiveRuns;
}

/** Starts one agent worker: the BullMQ consumer, the cancel listener, heartbeats and the orphan sweeper. */
export async function startAgentWorker(config: WorkerConfig, logger: Logger): Promise<AgentWorker> {
  const workerId = config.WORKER_ID ?? newWorkerId(hostname());
  const log = logger.child({ workerId });
  const prisma = createPrisma({ databaseUrl: config.DATABASE_URL, poolSize: Math.min(20, config.WORKER_CONCURRENCY + 4), preparedStatements: config.DB_PREPARED_STATEMENTS, queryTimeoutMs: config.DB_QUERY_TIMEOUT_MS, onPoolError: (err) => log.warn({ err: err.message }, "database pool error") });
  const redis = createRedis({ url: config.REDIS_URL, role: "commands", name: workerId });
  const subscriber = createRedis({ url: config.REDIS_URL, role: "subscriber", name: workerId });
  const bull = createRedis({ url: config.REDIS_URL, role: "bullmq", name: workerId });
  // A Redis outage is logged once per connection when it begins and once when it ends, not at every retry.
  for (const client of [redis, subscriber, bull]) logConnectionState(client, log);
  const memory = createMemoryClient({ baseUrl: config.MEMORY_URL, token: config.INTERNAL_TOKEN, timeoutMs: config.MEMORY_TIMEOUT_MS });
  const tools = new ToolRegistry({ timeoutMs: config.HTTP_TOOL_TIMEOUT_MS, maxBytes: config.HTTP_TOOL_MAX_BYTES, allowPrivate: config.HTTP_TOOL_ALLOW_PRIVATE });
  const deps: RunDeps = { config, logger: log, prisma, redis, redisPrefix: config.REDIS_PREFIX, models: new ModelClients(config), agents: new AgentCache(prisma), tools, memory, workerId, heartbeatTtlMs: config.LOCK_DURATION_MS, reconnectBeats: new ReconnectBeats(redis) };
  const active = new ActiveRuns();

  subscriber.on("message", (_channel: string, message: string) => {
    try {
      const msg = controlMessage.parse(JSON.parse(message));
      if (active.stop(msg.run_id, "cancel")) log.info({ runId: msg.run_id }, "cancelling run");
    } catch {
      log.warn("ignored a malformed control message");
    }
  });
  await subscriber.subscribe(controlChannel(config.REDIS_PREFIX));
  // Control messages published while the subscriber was reconnecting are lost: once it is back,
  // look at the cancel flags of every run in progress here.
  subscriber.on("ready", () => {
    for (const runId of active.ids()) {
      void redis.exists(runCancelKey(config.REDIS_PREFIX, runId)).then((flagged) => {
        if (flagged && active.stop(runId, "cancel")) log.info({ runId }, "cancelling run (flag found after reconnecting)");
      }, () => {});
    }
  });

  // Shutdown, once no job runs here, cuts short the final-failure handlers' waits and waits for
  // their decisions before closing the connections they use.
  const stopping = new AbortController();
  const failuresDeciding = new Set<Promise<boolean>>();
  // The last database check's outcome (below); usable until the first says otherwise.
  let database: SchemaState | "unavailable" | undefined;
  const worker = createWorker({
    queueName: AGENT_RUNS_QUEUE,
    prefix: bullPrefix(config.REDIS_PREFIX),
    connection: bull,
    processor: agentRunProcessor(deps, active, () => database === undefined || database === "ok"),
    logger: log,
    concurrency: config.WORKER_CONCURRENCY,
    lockDurationMs: config.LOCK_DURATION_MS,
    stalledIntervalMs: config.STALLED_INTERVAL_MS,
    // A job that failed for good (infrastructure errors on every attempt) must not leave its run open.
    onFinalFailure: (job, err) => {
      const runId = (job.data as { runId?: string }).runId;
      if (!runId) return;
      const decided = endRunOfFailedJob(deps, runId, err, (id) => active.has(id), stopping.signal);
      failuresDeciding.add(decided);
      return decided.then(() => {}).finally(() => failuresDeciding.delete(decided));
    },
  });

  // The worker counts as live (readiness, health checks) and takes jobs only while it reaches
  // its own database, migrated for this code: one that cannot would take jobs only to fail them,
  // using up their attempts while other workers could run them (a worker refused connections,
  // "too many clients", beside healthy ones). Runs in progress here go on. It stops fetching
  // (BullMQ's pause) only once no run is in progress here: a worker paused with jobs active
  // fetches again, after resume(), only when one of them ends (its loop waits on them), which
  // could be an hour; until then the processor hands every job it fetches back.
  // A database that hangs stops the heartbeat (no beat starts while one is in progress), as one that refuses does.
  const stopHeartbeat = every(
    5000,
    async () => {
      const now = await schemaState(prisma).catch((): "unavailable" => "unavailable");
      if (now !== database) {
        if (now === "ok") log.info("database reachable: heartbeating and taking jobs");
        else log.error({ database: now }, "database not usable: not heartbeating nor taking jobs, so not counted as a live worker");
      }
      database = now;
      if (now === "ok") {
        if (worker.isPaused() && !closing) worker.resume();
        await recordWorkerHeartbeat(redis, config.REDIS_PREFIX, workerId).catch(() => {});
      } else {
        if (!worker.isPaused() && active.size === 0) void worker.pause(true).catch((err: Error) => log.warn({ err: err.message }, "could not stop taking jobs"));
        await redis.zrem(workersKey(config.REDIS_PREFIX), workerId).catch(() => {});
      }
    },
    { now: true },
  );
  const queue = createRunQueue({ connection: bull, redisPrefix: config.REDIS_PREFIX });
  // The queue repeats its connection's errors, which the connection's watch reports.
  queue.on("error", (err) => (isUnavailableError(err) ? log.debug({ err: err.message }, "queue: redis unreachable") : log.warn({ err: err.message }, "queue error")));
  // Each sweep on its own schedule: one that takes longer than its interval is not started again meanwhile.
  const sweepEveryMs = Math.max(1000, Math.floor(Math.min(config.RUN_STALE_AFTER_MS, config.QUEUED_STALE_AFTER_MS) / 4));
  const sweep = (what: string, run: () => Promise<unknown>) => every(sweepEveryMs, () => run().catch((err: Error) => log.warn({ err: err.message }, `${what} failed`)));
  const stopSweeps = [
    sweep("orphan sweep", () => sweepOrphanedRuns(deps, queue)),
    sweep("queued-run sweep", () => reviveQueuedRuns(deps, queue)),
    sweep("expired Idempotency-Key sweep", () => deleteExpiredIdempotencyKeys(prisma)),
  ];
  log.info({ concurrency: config.WORKER_CONCURRENCY, settings: settingsForLog(config) }, "agent worker started");

  let closing: Promise<boolean> | null = null;
  const close = (graceMs = config.SHUTDOWN_GRACE_MS) =>
    (closing ??= (async () => {
      active.close();
      stopHeartbeat();
      for (const stop of stopSweeps) stop();
      const grace = setTimeout(() => active.stopAll("shutdown"), graceMs);
      // What is still being closed; whatever is left when the deadline passes is reported.
      const open = ["BullMQ worker", "queue", "Redis connections", "database pool"];
      const closeAll = async () => {
        await worker.close();
        clearTimeout(grace);
        // No job runs here any more: the decisions still waiting for a renewal are cut short.
        stopping.abort();
        await Promise.allSettled(failuresDeciding);
        open.shift();
        await queue.close().catch(() => {});
        open.shift();
        await redis.zrem(workersKey(config.REDIS_PREFIX), workerId).catch(() => {});
        await Promise.all([closeRedis(subscriber), closeRedis(bull), closeRedis(redis)]);
        open.shift();
        await prisma.$disconnect();
        open.shift();
      };
      let deadline: NodeJS.Timeout | undefined;
      const timedOut = new Promise<true>((resolve) => (deadline = setTimeout(() => resolve(true), graceMs + SHUTDOWN_MARGIN_MS)));
      const late = await Promise.race([closeAll().then(() => false), timedOut]);
      clearTimeout(deadline);
      if (!late) {
        log.info("agent worker stopped");
        return true;
      }
      log.error({ notClosed: open, activeRuns: active.ids().length, deadlineMs: graceMs + SHUTDOWN_MARGIN_MS }, "shutdown timed out: not everything closed");
      for (const client of [subscriber, bull, redis]) client.disconnect();
      return false;
    })());

  return { workerId, close, active };
}
