import { loadConfig, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { workerConfigSchema } from "./config";
import { startAgentWorker } from "./agent-worker";

runMain(async () => {
  const config = loadConfig(workerConfigSchema);
  const logger = createLogger({ service: "agent-worker", level: config.LOG_LEVEL });
  const worker = await startAgentWorker(config, logger);
  const stop = async (signal: string) => {
    logger.info({ signal }, "shutting down");
    await worker.close();
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
});
