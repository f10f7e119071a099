import type { Command } from "commander";
import { newId } from "@agentrun/db";
import { generateWidgetKey } from "@agentrun/api-keys";
import { NotFoundError } from "../cli-errors";
import type { CommandContext } from "../command-context";
import { keyOption, originListOption, textOption } from "../option-parsers";

type Ctx = Pick<CommandContext, "prisma">;

/** `widget-key create`: a publishable key for one agent, usable only from `origins`. */
export async function createWidgetKey({ prisma }: Ctx, opts: { agent: string; origins: string[] }): Promise<{ widget_key: string }> {
  const agent = await prisma.agent.findUnique({ where: { id: opts.agent }, select: { id: true } });
  if (!agent) throw new NotFoundError(`no agent ${opts.agent}`);
  const key = generateWidgetKey();
  await prisma.widgetKey.create({ data: { id: newId("wk"), agentId: opts.agent, key, allowedOrigins: opts.origins } });
  return { widget_key: key };
}

/**
 * `widget-key revoke`: sets `revoked_at`; revoking twice succeeds and keeps the first time. Widget
 * keys are publishable, but a secret API key given by mistake is shown by its display prefix only.
 */
export async function revokeWidgetKey({ prisma }: Ctx, key: string): Promise<{ widget_key: string; revoked: true }> {
  const { count } = await prisma.widgetKey.updateMany({ where: { key, revokedAt: null }, data: { revokedAt: new Date() } });
  if (count === 0) {
    const exists = await prisma.widgetKey.findUnique({ where: { key }, select: { id: true } });
    if (!exists) throw new NotFoundError(`no widget key ${key}`);
  }
  return { widget_key: key, revoked: true };
}

/** Registers `widget-key create` and `widget-key revoke`. */
export function registerWidgetKeyCommands(program: Command, ctx: CommandContext): void {
  const wk = program.command("widget-key").description("manage publishable widget keys");
  wk.command("create")
    .description("create a widget key; prints {widget_key}")
    .requiredOption("--agent <agent_id>", "agent the widget talks to", textOption("--agent"))
    .requiredOption("--origins <list>", "comma-separated allowed origins, e.g. https://a.example,https://b.example", originListOption("--origins"))
    .action(async (o: { agent: string; origins: string[] }) => {
      const created = await createWidgetKey(ctx, o);
      ctx.emit(created, `widget key ${created.widget_key} was created`);
    });
  wk.command("revoke")
    .description("revoke a widget key; prints {widget_key, revoked}")
    .requiredOption("--key <pk_key>", "the widget key (pk_…)", keyOption("--key"))
    .action(async (o: { key: string }) => ctx.emit(await revokeWidgetKey(ctx, o.key), `widget key ${o.key} is revoked`));
}
