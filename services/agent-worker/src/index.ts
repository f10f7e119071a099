import { loadConfig, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { workerConfigSchema } from "./config";
import { startAgentWorker, type AgentWorker } from "./agent-worker";

runMain(async () => {
  const config = loadConfig(workerConfigSchema);
  const logger = createLogger({ service: "agent-worker", level: config.LOG_LEVEL });
  // Handlers first, so that a signal during start-up still shuts down cleanly.
  let worker: AgentWorker | null = null;
  let stopRequested: string | null = null;
  const stop = async (signal: string) => {
    if (stopRequested && worker === null) return;
    stopRequested = signal;
    if (!worker) return;
    logger.info({ signal }, "shutting down");
    await worker.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
  worker = await startAgentWorker(config, logger);
  if (stopRequested) await stop(stopRequested);
});
