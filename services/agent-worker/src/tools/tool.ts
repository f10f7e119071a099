import type { z } from "zod";
import type { MemoryClient } from "@agentrun/memory-client";

/**
 * How deeply a tool's arguments or a fetched JSON page may nest arrays and objects. Deeper values
 * would overflow the stack of the recursive steps after parsing (cleaning for storage,
 * serialising the run's events) and end the run with an internal error.
 */
export const MAX_TOOL_JSON_DEPTH = 64;

/** What a tool may use while it runs: the run's scope and the worker's clients. */
export interface ToolContext {
  orgId: string;
  agentId: string;
  /** The end user of the run (context.user_id), if given. */
  userId?: string;
  /** Hosts the http tool may reach, from the agent. */
  httpAllowlist: string[];
  memory: MemoryClient;
  /** The run, named in the memory service's log (as its request id) for the calls made for it. */
  runId: string;
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

export interface ToolErrorOptions {
  /**
   * Whether the call is charged. A call the tool refused before doing its work (a host not on the
   * allow-list, a missing user) or that this service's own limits kept from running (no free calc
   * thread) is not; an error the tool met while doing it (a site that answered 500, an invalid
   * expression) is: the tool ran.
   * @defaultValue true
   */
  charged?: boolean;
}

/** A tool failure the model sees as the tool's result: `{error:{code,message}}`. */
export class ToolError extends Error {
  override name = "ToolError";
  readonly charged: boolean;
  constructor(
    readonly code: string,
    message: string,
    options: ToolErrorOptions = {},
  ) {
    super(message);
    this.charged = options.charged ?? true;
  }
}

/**
 * Thrown by a tool whose run was stopped (`reason`: the run's signal's) while the call waited for
 * this service's own capacity (a calc thread, a host name lookup slot), before its work began:
 * recorded as stopped, and not charged.
 */
export class StoppedBeforeStart extends Error {
  override name = "StoppedBeforeStart";
  constructor(readonly reason: unknown) {
    super("the run stopped before the tool started");
  }
}

export function defineAction<P extends z.ZodType>(a: ToolAction<P>): ToolAction {
  return a as unknown as ToolAction;
}
