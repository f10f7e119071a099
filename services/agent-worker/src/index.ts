import { loadConfig, onStopRequest, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { workerConfigSchema } from "./config";
import { startAgentWorker, type AgentWorker } from "./agent-worker";

runMain(async () => {
  const config = loadConfig(workerConfigSchema);
  const logger = createLogger({
    service: "agent-worker",
    level: config.LOG_LEVEL,
    // A model provider's error may quote the key it was sent (its message, then the run's failure).
    secrets: [config.OPENAI_API_KEY, ...Object.values(config.MODEL_API_KEYS), config.INTERNAL_TOKEN],
  });
  // Handlers first, so that a signal during start-up still shuts down cleanly.
  let worker: AgentWorker | null = null;
  let stopRequested: string | null = null;
  let stopping = false;
  let startupDeadline: NodeJS.Timeout | undefined;
  // close() is bounded (SHUTDOWN_GRACE_MS plus a margin), so the process always exits: 0 when
  // everything closed, 1 when the deadline passed first (close() logged what was left open).
  const stop = (signal: string) => {
    if (!worker) {
      // Still starting (Redis or PostgreSQL not reachable yet, say): start-up is given the grace a
      // run would get to finish, then the process exits without it; no run has been taken yet.
      if (stopRequested === null) {
        logger.info({ signal }, "shutting down once start-up finishes");
        startupDeadline = setTimeout(() => {
          logger.warn({ signal, waitedMs: config.SHUTDOWN_GRACE_MS }, "start-up did not finish; exiting");
          process.exit(1);
        }, config.SHUTDOWN_GRACE_MS).unref();
      }
      stopRequested ??= signal;
      return;
    }
    stopRequested ??= signal;
    if (stopping) {
      logger.info({ signal }, "already shutting down");
      return;
    }
    stopping = true;
    logger.info({ signal }, "shutting down");
    worker.close().then(
      (closed) => process.exit(closed ? 0 : 1),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  onStopRequest(stop);
  worker = await startAgentWorker(config, logger);
  clearTimeout(startupDeadline);
  if (stopRequested) stop(stopRequested);
});
