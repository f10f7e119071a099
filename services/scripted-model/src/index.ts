/** Boots the scripted model: `SCRIPTED_MODEL_PORT` or `PORT` (default 4010), `SCRIPTED_MODEL_HOST`, `LOG_LEVEL`. */
import { createServer } from "node:http";
import { loadConfig, onStopRequest, runMain } from "@agentrun/config";
import { createLogger } from "@agentrun/logger";
import { createApp } from "./app";
import { configSchema } from "./config";
import { closeServer, listen } from "./server";

/**
 * How long streams in progress may go on after SIGTERM/SIGINT. Longer than the agent worker's
 * default `SHUTDOWN_GRACE_MS` (10 s): when a whole stack is signalled at once (every process of
 * a group, say; `npm run dev` and `npm start` stop the model last), the answers the worker's runs
 * are streaming are not cut. A stream whose client goes away ends at once, so a stopping worker
 * never waits on it.
 */
const SHUTDOWN_GRACE_MS = 15_000;

async function main(): Promise<void> {
  const config = loadConfig(configSchema);
  const logger = createLogger({ service: "scripted-model", level: config.LOG_LEVEL });
  const server = createServer(createApp({ logger }));
  const { port } = await listen(server, config.PORT, config.HOST);
  logger.info({ port, host: config.HOST ?? "every interface" }, "scripted model listening");

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    closeServer(server, SHUTDOWN_GRACE_MS).then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  onStopRequest(shutdown);
}

runMain(main);
