import type { Command } from "commander";
import { newId } from "@agentrun/db";
import { API_KEY_PREFIX, generateApiKey, hashApiKey, looksLikeApiKey } from "@agentrun/api-keys";
import { NotFoundError, UsageError } from "../cli-errors";
import type { CommandContext } from "../command-context";
import { keyOption, textOption } from "../option-parsers";

type Ctx = Pick<CommandContext, "prisma">;

async function requireOrg({ prisma }: Ctx, orgId: string): Promise<void> {
  const org = await prisma.organization.findUnique({ where: { id: orgId }, select: { id: true } });
  if (!org) throw new NotFoundError(`no organization ${orgId}`);
}

/** `key create`: a new secret key; only its hash and display prefix are stored. */
export async function createKey(ctx: Ctx, opts: { org: string; name?: string }): Promise<{ key_id: string; api_key: string }> {
  await requireOrg(ctx, opts.org);
  const { apiKey, prefix, keyHash } = generateApiKey();
  const id = newId("key");
  await ctx.prisma.apiKey.create({ data: { id, orgId: opts.org, name: opts.name ?? null, prefix, keyHash } });
  return { key_id: id, api_key: apiKey };
}

/**
 * Where to find the key that `--key` names: by id (`key_…`), or by the hash of the whole secret
 * key. (Messages naming it show a secret key's display prefix only: see `oneLine`.)
 */
function keyLookup(key: string): { id: string } | { keyHash: string } {
  if (!key.startsWith(API_KEY_PREFIX)) return { id: key };
  if (!looksLikeApiKey(key)) throw new UsageError(`--key ${key} is not a whole API key; give the key id (key_…) or the whole key`);
  return { keyHash: hashApiKey(key) };
}

/**
 * `key revoke`: sets `revoked_at` of the key named by its id or by the secret key itself.
 * Revoking a revoked key succeeds and keeps the first time.
 */
export async function revokeKey({ prisma }: Ctx, key: string): Promise<{ key_id: string; revoked: true }> {
  const where = keyLookup(key);
  const row = await prisma.apiKey.findUnique({ where, select: { id: true } });
  if (!row) throw new NotFoundError(`no API key ${key}`);
  await prisma.apiKey.updateMany({ where: { id: row.id, revokedAt: null }, data: { revokedAt: new Date() } });
  return { key_id: row.id, revoked: true };
}

/** `key list`: an organization's keys, oldest first, without any secret. */
export async function listKeys(ctx: Ctx, orgId: string): Promise<{ keys: Record<string, string | null>[] }> {
  await requireOrg(ctx, orgId);
  const rows = await ctx.prisma.apiKey.findMany({ where: { orgId }, orderBy: { id: "asc" } });
  return {
    keys: rows.map((k) => ({
      key_id: k.id,
      name: k.name,
      prefix: k.prefix,
      created_at: k.createdAt.toISOString(),
      revoked_at: k.revokedAt?.toISOString() ?? null,
      last_used_at: k.lastUsedAt?.toISOString() ?? null,
    })),
  };
}

/** Registers `key create`, `key revoke` and `key list`. */
export function registerKeyCommands(program: Command, ctx: CommandContext): void {
  const key = program.command("key").description("manage API keys");
  key
    .command("create")
    .description("create an API key; prints {key_id, api_key} (the key is shown only this once)")
    .requiredOption("--org <org_id>", "organization", textOption("--org"))
    .option("--name <label>", "label shown in listings", textOption("--name"))
    .action(async (o: { org: string; name?: string }) => {
      const created = await createKey(ctx, o);
      // The secret exists only in the result: a key whose result was lost is one nobody can use.
      const id = created.key_id;
      ctx.emit(created, `API key ${id} was created, and its secret is lost with the result: revoke it with \`key revoke --key ${id}\``);
    });
  key
    .command("revoke")
    .description("revoke an API key; prints {key_id, revoked}")
    .requiredOption("--key <key_id>", "key id (key_…), or the whole API key (ar_live_…)", keyOption("--key"))
    .action(async (o: { key: string }) => {
      const revoked = await revokeKey(ctx, o.key);
      ctx.emit(revoked, `API key ${revoked.key_id} is revoked`);
    });
  key
    .command("list")
    .description("list an organization's API keys; prints {keys}")
    .requiredOption("--org <org_id>", "organization", textOption("--org"))
    .action(async (o: { org: string }) => ctx.emit(await listKeys(ctx, o.org)));
}
