import type { z } from "zod";
import type { MemoryClient } from "@agentrun/memory-client";

/** What a tool may use while it runs: the run's scope and the worker's clients. */
export interface ToolContext {
  orgId: string;
  agentId: string;
  /** The end user of the run (context.user_id), if given. */
  userId?: string;
  /** Hosts the http tool may reach, from the agent. */
  httpAllowlist: string[];
  memory: MemoryClient;
  signal: AbortSignal;
}

/** One operation of a built-in tool, offered to the model as the function `<tool>_<action>`. */
export interface ToolAction<P extends z.ZodType = z.ZodType> {
  tool: string;
  action: string;
  description: string;
  params: P;
  run(params: z.infer<P>, ctx: ToolContext): Promise<unknown>;
}

/** A tool failure the model sees as the tool's result: `{error:{code,message}}`. */
export class ToolError extends Error {
  override name = "ToolError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function defineAction<P extends z.ZodType>(a: ToolAction<P>): ToolAction {
  return a as unknown as ToolAction;
}
