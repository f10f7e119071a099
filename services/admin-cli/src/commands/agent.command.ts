import type { Command } from "commander";
import { newId } from "@agentrun/db";
import { NotFoundError } from "../cli-errors";
import type { CommandContext } from "../command-context";
import { hostListOption, httpUrlOption, intOption, MAX_PRICING_PART, numberOption, pricingOption, subsetOption, textOption } from "../option-parsers";

/** The built-in tools an agent can enable; `--tools` defaults to all of them. */
export const BUILT_IN_TOOLS = ["memory", "calc", "clock", "http"] as const;
export type BuiltInTool = (typeof BUILT_IN_TOOLS)[number];

/** Model name that the agent worker routes to the bundled scripted model. */
export const SCRIPTED_MODEL = "scripted";

/**
 * Model steps a run may take.
 * @defaultValue 8
 */
export const DEFAULT_MAX_STEPS = 8;
/** Upper bound of `--max-steps`. */
export const MAX_MAX_STEPS = 50;

/** Inputs of `agent create` after option parsing. */
export interface AgentCreateOptions {
  org: string;
  name: string;
  /** @defaultValue {@link SCRIPTED_MODEL} */
  model?: string;
  /** @defaultValue "" */
  instructions?: string;
  /** @defaultValue every tool of {@link BUILT_IN_TOOLS} */
  tools?: BuiltInTool[];
  /** @defaultValue {@link DEFAULT_MAX_STEPS} */
  maxSteps?: number;
  /** @defaultValue null (the model's own default) */
  temperature?: number;
  /** @defaultValue [] (the http tool may fetch nothing) */
  httpAllow?: string[];
  /** @defaultValue null (the service default endpoint for the model) */
  baseUrl?: string;
  /** @defaultValue null: 1 credit per run, per tool call and per 1,000 tokens */
  pricing?: Record<string, number>;
}

/** `agent create`: a new agent of an existing organization. */
export async function createAgent({ prisma }: Pick<CommandContext, "prisma">, o: AgentCreateOptions): Promise<{ agent_id: string }> {
  const org = await prisma.organization.findUnique({ where: { id: o.org }, select: { id: true } });
  if (!org) throw new NotFoundError(`no organization ${o.org}`);
  const id = newId("agt");
  await prisma.agent.create({
    data: {
      id,
      orgId: o.org,
      name: o.name,
      model: o.model ?? SCRIPTED_MODEL,
      baseUrl: o.baseUrl ?? null,
      instructions: o.instructions ?? "",
      tools: o.tools ?? [...BUILT_IN_TOOLS],
      maxSteps: o.maxSteps ?? DEFAULT_MAX_STEPS,
      temperature: o.temperature ?? null,
      httpAllowlist: o.httpAllow ?? [],
      ...(o.pricing ? { pricing: o.pricing } : {}),
    },
  });
  return { agent_id: id };
}

/** Registers `agent create`. */
export function registerAgentCommands(program: Command, ctx: CommandContext): void {
  const agent = program.command("agent").description("manage agents");
  agent
    .command("create")
    .description("create an agent; prints {agent_id}")
    .requiredOption("--org <org_id>", "organization", textOption("--org"))
    .requiredOption("--name <name>", "display name", textOption("--name"))
    .option("--model <model>", `model name (default: ${SCRIPTED_MODEL}, the bundled scripted model)`, textOption("--model"))
    .option("--instructions <text>", "system instructions (default: none)")
    .option("--tools <list>", `comma-separated tools (default: ${BUILT_IN_TOOLS.join(",")})`, subsetOption("--tools", BUILT_IN_TOOLS))
    .option("--max-steps <n>", `model steps per run, 1 to ${MAX_MAX_STEPS} (default: ${DEFAULT_MAX_STEPS})`, intOption("--max-steps", 1, MAX_MAX_STEPS))
    .option("--temperature <t>", "sampling temperature, 0 to 2 (default: the model's)", numberOption("--temperature", 0, 2))
    .option("--http-allow <hosts>", "comma-separated hosts the http tool may fetch (*.example.com for subdomains)", hostListOption("--http-allow"))
    .option("--base-url <url>", "OpenAI-compatible base URL (default: the service's); its key comes from the worker's MODEL_API_KEYS", httpUrlOption("--base-url"))
    .option("--pricing <parts>", `credits per run, tool call and 1,000 tokens, each 0 to ${MAX_PRICING_PART}, e.g. base=2,per_tool_call=1,per_1k_tokens=3 (default: 1 each)`, pricingOption("--pricing"))
    .action(async (o: AgentCreateOptions) => {
      const created = await createAgent(ctx, o);
      ctx.emit(created, `agent ${created.agent_id} was created`);
    });
}
