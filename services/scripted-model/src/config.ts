/** The scripted model's environment. */
import { z } from "zod";
import { listenHost, logLevel, ownPort, port } from "@agentrun/config";

export const configSchema = z
  .object({
    /** The port; wins over PORT, which a whole-stack environment sets for the gateway. */
    SCRIPTED_MODEL_PORT: ownPort,
    /** @defaultValue 4010 */
    PORT: port(4010),
    /** The address to listen on. @defaultValue every interface */
    SCRIPTED_MODEL_HOST: listenHost,
    LOG_LEVEL: logLevel,
  })
  .transform(({ SCRIPTED_MODEL_PORT, SCRIPTED_MODEL_HOST, ...config }) => ({ ...config, PORT: SCRIPTED_MODEL_PORT ?? config.PORT, HOST: SCRIPTED_MODEL_HOST }));

export type Config = z.infer<typeof configSchema>;
