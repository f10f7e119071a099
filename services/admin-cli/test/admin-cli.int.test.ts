import { createHash } from "node:crypto";
import { createPrisma, type PrismaClient } from "@agentrun/db";
import { testEnv } from "@agentrun/testing";
import { runCli, type CliResult } from "../src/cli";
import { createOrg } from "../src/commands/org.command";

let prisma: PrismaClient;

beforeAll(() => {
  prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 4 });
});

afterAll(async () => {
  await prisma.$disconnect();
});

/** Runs a command in-process and returns its JSON object, failing the test on an error result. */
async function ok(...argv: string[]): Promise<Record<string, any>> {
  const res = await runCli(argv, { prisma });
  if (!("stdout" in res)) throw new Error(`expected success for ${argv.join(" ")}, got ${JSON.stringify(res)}`);
  return res.stdout;
}

async function fails(...argv: string[]): Promise<{ exitCode: number; stderr: string }> {
  const res: CliResult = await runCli(argv, { prisma });
  if ("stdout" in res) throw new Error(`expected failure for ${argv.join(" ")}, got ${JSON.stringify(res)}`);
  expect(res.stderr).toMatch(/^error: /);
  expect(res.stderr).not.toContain("\n");
  return res;
}

async function newOrg(...extra: string[]): Promise<string> {
  return (await ok("org", "create", "--name", `org-${Math.random().toString(36).slice(2)}`, ...extra)).org_id as string;
}

async function newAgent(orgId: string, ...extra: string[]): Promise<string> {
  return (await ok("agent", "create", "--org", orgId, "--name", "Helper", ...extra)).agent_id as string;
}

describe("org create", () => {
  it("creates a free org with 1000 credits granted through the ledger", async () => {
    const out = await ok("org", "create", "--name", "Acme");
    expect(Object.keys(out)).toEqual(["org_id"]);
    expect(out.org_id).toMatch(/^org_[0-9a-f]{32}$/);
    const org = await prisma.organization.findUniqueOrThrow({ where: { id: out.org_id }, include: { ledger: true } });
    expect(org).toMatchObject({ name: "Acme", plan: "free", rpmLimit: null, creditBalance: 1000 });
    expect(org.ledger).toEqual([expect.objectContaining({ amount: 1000, reason: "grant", balanceAfter: 1000, runId: null })]);
  });

  it("takes plan, credits and an enterprise rpm", async () => {
    const orgId = await newOrg("--plan", "enterprise", "--credits", "50", "--rpm", "600");
    expect(await prisma.organization.findUnique({ where: { id: orgId } })).toMatchObject({ plan: "enterprise", rpmLimit: 600, creditBalance: 50 });
  });

  it("gives enterprise orgs 1000 rpm by default and other plans none of their own", async () => {
    const ent = await newOrg("--plan", "enterprise");
    const pro = await newOrg("--plan", "pro");
    expect((await prisma.organization.findUniqueOrThrow({ where: { id: ent } })).rpmLimit).toBe(1000);
    expect((await prisma.organization.findUniqueOrThrow({ where: { id: pro } })).rpmLimit).toBeNull();
  });

  it("accepts --credits 0 without a ledger entry", async () => {
    const orgId = await newOrg("--credits", "0");
    expect(await ok("credits", "show", "--org", orgId)).toEqual({ balance: 0 });
    expect(await prisma.creditLedgerEntry.count({ where: { orgId } })).toBe(0);
  });

  it.each([
    [["--plan", "gold"], "error: --plan must be one of free, starter, pro, enterprise"],
    [["--rpm", "100"], "error: --rpm is only allowed with --plan enterprise"],
    [["--plan", "pro", "--rpm", "100"], "error: --rpm is only allowed with --plan enterprise"],
    [["--plan", "enterprise", "--rpm", "0"], "error: --rpm must be an integer from 1 to 2147483647"],
    [["--credits", "-1"], "error: --credits must be an integer from 0 to 2147483647"],
    [["--credits", "1.5"], "error: --credits must be an integer from 0 to 2147483647"],
    [["--credits", "ten"], "error: --credits must be an integer from 0 to 2147483647"],
    [["--credits", "99999999999"], "error: --credits must be an integer from 0 to 2147483647"],
  ])("rejects %j with exit 2", async (extra, message) => {
    // A name no other test uses: other files create organizations in the same database meanwhile.
    const name = `Bad ${Math.random().toString(36).slice(2)}`;
    expect(await fails("org", "create", "--name", name, ...extra)).toEqual({ exitCode: 2, stderr: message });
    expect(await prisma.organization.count({ where: { name } })).toBe(0);
  });

  it("leaves no organization behind when its grant fails", async () => {
    // The CLI's connection gives up on locks after 200 ms; the test holds the ledger locked, so
    // the grant fails as it would against a database too busy to take it.
    const url = new URL(testEnv().databaseUrl);
    url.searchParams.set("options", "-c lock_timeout=200");
    const impatient = createPrisma({ databaseUrl: url.toString(), poolSize: 2 });
    const name = `org-${Math.random().toString(36).slice(2)}`;
    try {
      const attempt = prisma.$transaction(async (tx) => {
        await tx.$executeRaw`LOCK TABLE credit_ledger IN EXCLUSIVE MODE`;
        return createOrg({ prisma: impatient }, { name, plan: "free", credits: 10 }).then(
          () => "created",
          (err: unknown) => String(err),
        );
      });
      expect(await attempt).toMatch(/lock timeout/);
    } finally {
      await impatient.$disconnect();
    }
    expect(await prisma.organization.count({ where: { name } })).toBe(0);
  });

  it("requires --name", async () => {
    expect(await fails("org", "create")).toEqual({ exitCode: 2, stderr: "error: required option '--name <name>' not specified" });
    expect((await fails("org", "create", "--name", "  ")).exitCode).toBe(2);
  });
});

describe("key create / revoke / list", () => {
  it("stores only the hash and prefix of a new key", async () => {
    const orgId = await newOrg();
    const out = await ok("key", "create", "--org", orgId, "--name", "ci");
    expect(Object.keys(out).sort()).toEqual(["api_key", "key_id"]);
    expect(out.api_key).toMatch(/^ar_live_[0-9A-Za-z]{32}$/);
    const row = await prisma.apiKey.findUniqueOrThrow({ where: { id: out.key_id } });
    expect(row).toMatchObject({ orgId, name: "ci", prefix: out.api_key.slice(0, 12), revokedAt: null });
    expect(row.keyHash).toBe(createHash("sha256").update(out.api_key).digest("hex"));
    // The key itself appears in no column of the table.
    const hits = await prisma.$queryRaw<unknown[]>`SELECT id FROM api_keys WHERE api_keys::text LIKE ${`%${out.api_key}%`}`;
    expect(hits).toHaveLength(0);
  });

  it("revokes a key, idempotently, and lists keys without secrets", async () => {
    const orgId = await newOrg();
    const { key_id: keyId } = await ok("key", "create", "--org", orgId);
    expect(await ok("key", "revoke", "--key", keyId)).toEqual({ key_id: keyId, revoked: true });
    const first = (await prisma.apiKey.findUniqueOrThrow({ where: { id: keyId } })).revokedAt;
    expect(first).toBeInstanceOf(Date);
    expect(await ok("key", "revoke", "--key", keyId)).toEqual({ key_id: keyId, revoked: true });
    expect((await prisma.apiKey.findUniqueOrThrow({ where: { id: keyId } })).revokedAt).toEqual(first);

    const { keys } = await ok("key", "list", "--org", orgId);
    expect(keys).toEqual([
      { key_id: keyId, name: null, prefix: expect.stringMatching(/^ar_live_/), created_at: expect.any(String), revoked_at: first!.toISOString(), last_used_at: null },
    ]);
  });

  it("reports unknown orgs and keys with exit 1", async () => {
    expect(await fails("key", "create", "--org", "org_missing")).toEqual({ exitCode: 1, stderr: "error: no organization org_missing" });
    expect(await fails("key", "revoke", "--key", "key_missing")).toEqual({ exitCode: 1, stderr: "error: no API key key_missing" });
    expect((await fails("key", "list", "--org", "org_missing")).exitCode).toBe(1);
  });
});

describe("agent create", () => {
  it("defaults to the scripted model, all tools and 8 steps", async () => {
    const orgId = await newOrg();
    const agentId = await newAgent(orgId);
    expect(agentId).toMatch(/^agt_/);
    expect(await prisma.agent.findUniqueOrThrow({ where: { id: agentId } })).toMatchObject({
      orgId, name: "Helper", model: "scripted", baseUrl: null, instructions: "", tools: ["memory", "calc", "clock", "http"],
      maxSteps: 8, temperature: null, httpAllowlist: [],
    });
  });

  it("takes every option", async () => {
    const orgId = await newOrg();
    const agentId = await newAgent(orgId, "--model", "gpt-4o-mini", "--instructions", "Be brief.", "--tools", "calc, clock",
      "--max-steps", "50", "--temperature", "0.3", "--http-allow", "API.example.com,*.foo.io", "--base-url", "http://127.0.0.1:4010/v1",
      "--pricing", "base=2, per_1k_tokens=0");
    expect(await prisma.agent.findUniqueOrThrow({ where: { id: agentId } })).toMatchObject({
      model: "gpt-4o-mini", instructions: "Be brief.", tools: ["calc", "clock"], maxSteps: 50, temperature: 0.3,
      httpAllowlist: ["api.example.com", "*.foo.io"], baseUrl: "http://127.0.0.1:4010/v1", pricing: { base: 2, per_1k_tokens: 0 },
    });
  });

  it.each([
    [["--tools", "calc,shell"], "error: --tools: unknown shell (allowed: memory, calc, clock, http)"],
    [["--max-steps", "0"], "error: --max-steps must be an integer from 1 to 50"],
    [["--max-steps", "51"], "error: --max-steps must be an integer from 1 to 50"],
    [["--temperature", "3"], "error: --temperature must be a number from 0 to 2"],
    [["--base-url", "ftp://x"], "error: --base-url must be an http(s) URL"],
    [["--http-allow", "https://a.example"], "error: --http-allow: not a host name: https://a.example"],
    [["--pricing", "base=-1"], "error: --pricing base must be an integer from 0 to 1000000"],
    [["--pricing", "base=1000001"], "error: --pricing base must be an integer from 0 to 1000000"],
    [["--pricing", "per_1k_tokens=2147483647"], "error: --pricing per_1k_tokens must be an integer from 0 to 1000000"],
    [["--pricing", "base=1,base=2"], "error: --pricing takes base=N,per_tool_call=N,per_1k_tokens=N (each at most once)"],
    [["--pricing", "cheap=1"], "error: --pricing takes base=N,per_tool_call=N,per_1k_tokens=N (each at most once)"],
  ])("rejects %j with exit 2", async (extra, message) => {
    const orgId = await newOrg();
    expect(await fails("agent", "create", "--org", orgId, "--name", "A", ...extra)).toEqual({ exitCode: 2, stderr: message });
  });

  it("accepts pricing parts up to 1000000", async () => {
    const agentId = await newAgent(await newOrg(), "--pricing", "base=1000000,per_tool_call=1000000,per_1k_tokens=1000000");
    expect((await prisma.agent.findUniqueOrThrow({ where: { id: agentId } })).pricing).toEqual({ base: 1_000_000, per_tool_call: 1_000_000, per_1k_tokens: 1_000_000 });
  });

  it("reports an unknown org", async () => {
    expect(await fails("agent", "create", "--org", "org_missing", "--name", "A")).toEqual({ exitCode: 1, stderr: "error: no organization org_missing" });
  });
});

describe("widget-key create / revoke", () => {
  it("stores normalised origins and revokes", async () => {
    const agentId = await newAgent(await newOrg());
    const out = await ok("widget-key", "create", "--agent", agentId, "--origins", "https://A.example/, http://b.example:8080,https://c.example:443");
    expect(Object.keys(out)).toEqual(["widget_key"]);
    expect(out.widget_key).toMatch(/^pk_[0-9A-Za-z]{24}$/);
    const row = await prisma.widgetKey.findUniqueOrThrow({ where: { key: out.widget_key } });
    expect(row).toMatchObject({ agentId, allowedOrigins: ["https://a.example", "http://b.example:8080", "https://c.example"], revokedAt: null });
    expect(row.id).toMatch(/^wk_/);

    expect(await ok("widget-key", "revoke", "--key", out.widget_key)).toEqual({ widget_key: out.widget_key, revoked: true });
    expect((await prisma.widgetKey.findUniqueOrThrow({ where: { key: out.widget_key } })).revokedAt).toBeInstanceOf(Date);
  });

  it.each(["https://a.example/path", "a.example", "ftp://a.example", "https://a.example?x=1", "https://u:p@a.example", "https://", "https://a.example#x"])(
    "rejects the origin %j with exit 2",
    async (origin) => {
      const agentId = await newAgent(await newOrg());
      const res = await fails("widget-key", "create", "--agent", agentId, "--origins", `https://ok.example,${origin}`);
      expect(res.exitCode).toBe(2);
      expect(res.stderr).toBe(`error: --origins: not an origin (scheme://host[:port]): ${origin}`);
    },
  );

  it("requires at least one origin and an existing agent", async () => {
    const agentId = await newAgent(await newOrg());
    expect(await fails("widget-key", "create", "--agent", agentId, "--origins", " , ")).toEqual({ exitCode: 2, stderr: "error: --origins must list at least one origin" });
    expect(await fails("widget-key", "create", "--agent", "agt_missing", "--origins", "https://a.example")).toEqual({ exitCode: 1, stderr: "error: no agent agt_missing" });
    expect(await fails("widget-key", "revoke", "--key", "pk_missing")).toEqual({ exitCode: 1, stderr: "error: no widget key pk_missing" });
  });
});

describe("credits add / show", () => {
  it("adds credits with a ledger entry and shows the balance", async () => {
    const orgId = await newOrg("--credits", "10");
    expect(await ok("credits", "add", "--org", orgId, "--amount", "25")).toEqual({ balance: 35 });
    expect(await ok("credits", "show", "--org", orgId)).toEqual({ balance: 35 });
    const ledger = await prisma.creditLedgerEntry.findMany({ where: { orgId }, orderBy: { id: "asc" } });
    expect(ledger.map((l) => [l.amount, l.reason, l.balanceAfter])).toEqual([[10, "grant", 10], [25, "grant", 35]]);
  });

  it.each(["1.5", "0", "-3", "1e3", "abc"])("rejects --amount %s with exit 2", async (amount) => {
    const orgId = await newOrg();
    expect(await fails("credits", "add", "--org", orgId, "--amount", amount)).toEqual({ exitCode: 2, stderr: "error: --amount must be an integer from 1 to 2147483647" });
    expect(await prisma.creditLedgerEntry.count({ where: { orgId } })).toBe(1);
  });

  it("refuses a grant that would take the balance past 2147483647 as a failed operation (exit 1), changing nothing", async () => {
    const orgId = await newOrg("--credits", "10");
    expect(await fails("credits", "add", "--org", orgId, "--amount", "2147483647")).toEqual({ exitCode: 1, stderr: "error: the balance would exceed 2147483647 credits" });
    expect(await ok("credits", "show", "--org", orgId)).toEqual({ balance: 10 });
    expect(await prisma.creditLedgerEntry.count({ where: { orgId } })).toBe(1);
  });

  it("reports an unknown org", async () => {
    expect(await fails("credits", "add", "--org", "org_missing", "--amount", "5")).toEqual({ exitCode: 1, stderr: "error: no organization org_missing" });
    expect(await fails("credits", "show", "--org", "org_missing")).toEqual({ exitCode: 1, stderr: "error: no organization org_missing" });
  });
});

describe("command line errors", () => {
  it.each([
    [["frob"], "error: unknown command 'frob'"],
    [["orgg", "create"], "error: unknown command 'orgg' (Did you mean org?)"],
    [["org", "create", "--name", "A", "--bogus"], "error: unknown option '--bogus'"],
    [["credits", "add", "--org", "o"], "error: required option '--amount <n>' not specified"],
    [["org"], "error: missing command; usage: cli org [options] [command] (see --help)"],
    [[], "error: missing command; usage: cli [options] [command] (see --help)"],
    [["org", "create", "--name"], "error: option '--name <name>' argument missing"],
  ])("%j → one line, exit 2", async (argv, message) => {
    expect(await fails(...argv)).toEqual({ exitCode: 2, stderr: message });
  });

  it("answers --help with one JSON object", async () => {
    const out = await ok("key", "--help");
    expect(out.help).toContain("Usage: cli key");
    expect(out.help).toContain("revoke");
  });

  it("answers the help command it lists as --help: `help`, `help org`, `help org create`", async () => {
    expect((await ok("help")).help).toContain("help [command]");
    expect((await ok("help", "org")).help).toContain("Usage: cli org [options] [command]");
    expect((await ok("help", "org", "create")).help).toContain("Usage: cli org create [options]");
    expect(await fails("help", "nope")).toEqual({ exitCode: 2, stderr: expect.stringMatching(/^error: unknown command 'nope'/) });
  });
});
