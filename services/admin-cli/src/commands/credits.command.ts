import type { Command } from "commander";
import { getBalance, grantCredits } from "@agentrun/credits";
import { NotFoundError } from "../cli-errors";
import type { CommandContext } from "../command-context";
import { intOption, MAX_INT32, textOption } from "../option-parsers";

type Ctx = Pick<CommandContext, "prisma">;

/** `credits add`: grants credits (one atomic increment plus a `grant` ledger entry). */
export async function addCredits({ prisma }: Ctx, orgId: string, amount: number): Promise<{ balance: number }> {
  // Checked first so that an unknown org reads the same here as in every other command.
  if ((await getBalance(prisma, orgId)) === null) throw new NotFoundError(`no organization ${orgId}`);
  return grantCredits(prisma, orgId, amount);
}

/** `credits show`: the current balance. */
export async function showCredits({ prisma }: Ctx, orgId: string): Promise<{ balance: number }> {
  const balance = await getBalance(prisma, orgId);
  if (balance === null) throw new NotFoundError(`no organization ${orgId}`);
  return { balance };
}

/** Registers `credits add` and `credits show`. */
export function registerCreditsCommands(program: Command, ctx: CommandContext): void {
  const credits = program.command("credits").description("grant and inspect credits");
  credits
    .command("add")
    .description("grant credits; prints {balance}")
    .requiredOption("--org <org_id>", "organization", textOption("--org"))
    .requiredOption("--amount <n>", `credits to add, 1 to ${MAX_INT32}`, intOption("--amount", 1))
    .action(async (o: { org: string; amount: number }) => {
      const { balance } = await addCredits(ctx, o.org, o.amount);
      ctx.emit({ balance }, `${o.amount} credits were added to ${o.org}, balance ${balance}`);
    });
  credits
    .command("show")
    .description("show the balance; prints {balance}")
    .requiredOption("--org <org_id>", "organization", textOption("--org"))
    .action(async (o: { org: string }) => ctx.emit(await showCredits(ctx, o.org)));
}
