import { z } from "zod";
import { nestsDeeperThan, storableJson, storableText } from "@agentrun/db";
import { echoed } from "@agentrun/errors";
import type { ChatCompletionTool } from "openai/resources/chat/completions";
import { calcEvaluate, warmCalcThreads } from "./calc.tool";
import { clockNow } from "./clock.tool";
import { httpGetAction, type HttpToolLimits } from "./http.tool";
import { memorySave, memorySearch } from "./memory.tool";
import { MAX_TOOL_JSON_DEPTH, ToolError, type ToolAction, type ToolContext } from "./tool";

/** Names an agent can enable; each brings all its actions. */

/** Longest tool error message given to the model and stored with the run (a tool may quote what it was given). */
export const MAX_TOOL_ERROR_CHARS = 2000;

export const BUILT_IN_TOOLS = ["memory", "calc", "clock", "http"] as const;

export interface ToolCallOutcome {
  tool: string;
  action: string;
  params: Record<string, unknown>;
  /** What the model sees; `{error:{code,message}}` when the call failed. */
  result: unknown;
  ok: boolean;
  /**
   * Whether the call is charged (the agent's `per_tool_call`): when the tool ran, whatever it
   * answered. A call refused before running (unknown or disabled function, arguments that are
   * not JSON or do not fit the tool, a refusal of the tool's own checks such as a host not on the
   * allow-list) is not, nor one failed by this service's own outage (the memory service
   * unavailable or timing out).
   */
  charged: boolean;
}

/** The actions of the built-in tools, by function name (`<tool>_<action>`). */
export class ToolRegistry {
  private readonly actions = new Map<string, ToolAction>();
  private readonly definitionCache = new Map<string, ChatCompletionTool[]>();

  constructor(httpLimits: HttpToolLimits) {
    for (const a of [memorySave, memorySearch, calcEvaluate, clockNow, httpGetAction(httpLimits)]) this.actions.set(`${a.tool}_${a.action}`, a);
  }

  /**
   * Gets ready the tools an agent enabled, while its model call goes on: the calc threads load
   * (about a second; a calculation waits for a thread at most CALC_MAX_WAIT_MS) on the first run
   * that may need them, not on its first calculation.
   */
  prepare(enabled: readonly string[]): void {
    if (enabled.includes("calc")) void warmCalcThreads().catch(() => {});
  }

  /** OpenAI function definitions for the tools an agent enabled. */
  definitions(enabled: readonly string[]): ChatCompletionTool[] {
    const key = [...enabled].sort().join(",");
    let defs = this.definitionCache.get(key);
    if (!defs) {
      defs = this.buildDefinitions(enabled);
      this.definitionCache.set(key, defs);
    }
    return defs;
  }

  private buildDefinitions(enabled: readonly string[]): ChatCompletionTool[] {
    return [...this.actions.entries()]
      .filter(([, a]) => enabled.includes(a.tool))
      .map(([name, a]) => ({
        type: "function" as const,
        function: { name, description: a.description, parameters: parametersOf(a.params) },
      }));
  }

  /**
   * Runs one call. Every failure (unknown or disabled function, bad arguments, the tool's own
   * error) becomes an error result for the model; only an aborted run rethrows. The outcome says
   * whether the call is charged.
   */
  async call(
    name: string,
    rawArgs: string,
    enabled: readonly string[],
    ctx: ToolContext,
    onStart?: (call: { tool: string; action: string; params: Record<string, unknown> }) => void,
  ): Promise<ToolCallOutcome> {
    const sep = name.indexOf("_");
    const [tool, action] = sep > 0 ? [name.slice(0, sep), name.slice(sep + 1)] : [name, ""];
    let params: Record<string, unknown> = {};
    let isObject = true;
    const fail = (code: string, message: string, charged: boolean): ToolCallOutcome => ({ tool, action, params, result: { error: { code, message: storableText(echoed(message, MAX_TOOL_ERROR_CHARS)) } }, ok: false, charged });
    if (nestsDeeperThan(Buffer.from(rawArgs), MAX_TOOL_JSON_DEPTH)) {
      params = { arguments: storableText(rawArgs) };
      onStart?.({ tool, action, params });
      return fail("invalid_arguments", `The arguments must not nest arrays and objects more than ${MAX_TOOL_JSON_DEPTH} levels deep.`, false);
    }
    try {
      // Arguments and results are stored with the run's events: PostgreSQL takes no U+0000.
      const parsed = storableJson(rawArgs.trim() ? JSON.parse(rawArgs) : {});
      isObject = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed);
      params = isObject ? parsed : { value: parsed };
    } catch {
      // Shown as the model sent them, so that the call does not look like one without arguments.
      params = { arguments: storableText(rawArgs) };
      onStart?.({ tool, action, params });
      return fail("invalid_arguments", "The arguments are not valid JSON.", false);
    }
    onStart?.({ tool, action, params });
    const def = this.actions.get(name);
    if (!def || !enabled.includes(def.tool)) return fail("unknown_tool", `No tool function '${name}' is available to this agent.`, false);
    if (!isObject) return fail("invalid_arguments", "The arguments must be a JSON object.", false);
    // A key set to null counts as absent: models in strict mode send null for optional parameters.
    const checked = def.params.safeParse(Object.fromEntries(Object.entries(params).filter(([, v]) => v !== null)));
    if (!checked.success) return fail("invalid_arguments", checked.error.issues.map((i) => `${i.path.join(".") || "arguments"}: ${i.message}`).join("; "), false);
    try {
      return { tool, action, params, result: storableJson(await def.run(checked.data, ctx)), ok: true, charged: true };
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      if (err instanceof ToolError) return fail(err.code, err.message, err.charged);
      // A dependency of this service's own (the memory service) down or timing out: not charged.
      if ((err as { code?: string }).code === "unavailable") return fail("unavailable", storableText((err as Error).message || "The tool is unavailable."), false);
      return fail("tool_error", storableText((err as Error).message || "The tool failed."), true);
    }
  }
}

/**
 * A function's parameters as JSON Schema, without the `$schema` keyword zod puts at the top:
 * function declarations are a schema's body, and some providers (Gemini's) refuse keys they do
 * not know there.
 */
function parametersOf(params: z.ZodType): Record<string, unknown> {
  const { $schema: _dialect, ...schema } = z.toJSONSchema(params) as Record<string, unknown>;
  return schema;
}
