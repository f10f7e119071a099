/** The scripted model's environment. */
import { z } from "zod";
import { logLevel, port } from "@agentrun/config";

export const configSchema = z.object({
  /** @defaultValue 4010 */
  PORT: port(4010),
  LOG_LEVEL: logLevel,
});

export type Config = z.infer<typeof configSchema>;
