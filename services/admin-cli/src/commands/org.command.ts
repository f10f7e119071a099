import type { Command } from "commander";
import { newId, type Plan } from "@agentrun/db";
import { grantCreditsInTransaction } from "@agentrun/credits";
import { UsageError } from "../cli-errors";
import type { CommandContext } from "../command-context";
import { choiceOption, intOption, MAX_INT32, textOption } from "../option-parsers";

/** Plans in the order of the schema's `Plan` enum. */
export const PLANS = ["free", "starter", "pro", "enterprise"] as const satisfies readonly Plan[];

/**
 * Initial credits of a new organization.
 * @defaultValue 1000
 */
export const DEFAULT_INITIAL_CREDITS = 1000;

/**
 * Requests per minute stored for an enterprise organization created without `--rpm`. Stored
 * explicitly (not left null) so that the limit an enterprise customer has is visible in the
 * database and changes only by an update of that row.
 * @defaultValue 1000
 */
export const DEFAULT_ENTERPRISE_RPM = 1000;

interface OrgCreateOptions {
  name: string;
  plan: Plan;
  credits: number;
  rpm?: number;
}

/**
 * `org create`: a new organization with its initial credits granted through the ledger. The row
 * and the grant are one transaction, so a failed grant leaves no organization behind.
 */
export async function createOrg({ prisma }: Pick<CommandContext, "prisma">, opts: OrgCreateOptions): Promise<{ org_id: string }> {
  if (opts.rpm !== undefined && opts.plan !== "enterprise") throw new UsageError("--rpm is only allowed with --plan enterprise");
  const rpmLimit = opts.plan === "enterprise" ? (opts.rpm ?? DEFAULT_ENTERPRISE_RPM) : null;
  const id = newId("org");
  await prisma.$transaction(async (tx) => {
    await tx.organization.create({ data: { id, name: opts.name, plan: opts.plan, rpmLimit } });
    if (opts.credits > 0) await grantCreditsInTransaction(tx, id, opts.credits);
  });
  return { org_id: id };
}

/** Registers `org create`. */
export function registerOrgCommands(program: Command, ctx: CommandContext): void {
  const org = program.command("org").description("manage organizations");
  org
    .command("create")
    .description("create an organization; prints {org_id}")
    .requiredOption("--name <name>", "display name", textOption("--name"))
    .option("--plan <plan>", `one of ${PLANS.join(", ")} (default: free)`, choiceOption("--plan", PLANS))
    .option("--credits <n>", `initial credits, 0 to ${MAX_INT32} (default: ${DEFAULT_INITIAL_CREDITS})`, intOption("--credits", 0))
    .option("--rpm <n>", `requests per minute, enterprise only (default: ${DEFAULT_ENTERPRISE_RPM})`, intOption("--rpm", 1))
    .action(async (o: { name: string; plan?: Plan; credits?: number; rpm?: number }) => {
      const created = await createOrg(ctx, { name: o.name, plan: o.plan ?? "free", credits: o.credits ?? DEFAULT_INITIAL_CREDITS, rpm: o.rpm });
      ctx.emit(created, `organization ${created.org_id} was created`);
    });
}
