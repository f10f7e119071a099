import { testCli } from "./cli-fixture";

// Option values as operators paste them: secret keys with surrounding whitespace or a `Bearer `
// prefix, secrets where an id belongs, and empty values.
const cli = testCli();
const { run, ok } = cli;

async function newKey(): Promise<{ keyId: string; apiKey: string }> {
  const { org_id: orgId } = await ok("org", "create", "--name", `org-${Math.random().toString(36).slice(2)}`);
  const { key_id: keyId, api_key: apiKey } = await ok("key", "create", "--org", orgId);
  return { keyId, apiKey };
}

/** A well-formed secret key that no organization has. */
const SECRET = "ar_live_Zq8mN3pR7tV1xY4bC6dF9gH2jK5lM0nP";

describe("key revoke --key with a secret key as pasted", () => {
  it.each([
    ["surrounding spaces", (k: string) => `  ${k} `],
    ["a trailing carriage return", (k: string) => `${k}\r`],
    ["a Bearer prefix", (k: string) => `Bearer ${k}`],
    ["a lower-case bearer prefix and a tab", (k: string) => `bearer\t${k}\n`],
  ])("recognises the key with %s", async (_, paste) => {
    const { keyId, apiKey } = await newKey();
    expect(await ok("key", "revoke", "--key", paste(apiKey))).toEqual({ key_id: keyId, revoked: true });
    expect((await cli.prisma.apiKey.findUniqueOrThrow({ where: { id: keyId } })).revokedAt).toBeInstanceOf(Date);
  });
});

describe("messages never repeat a secret key, only its first 12 characters", () => {
  it.each([
    [["key", "revoke", "--key", ` ${SECRET}\r`], 1, "error: no API key ar_live_Zq8m…"],
    [["key", "revoke", "--key", `Bearer ${SECRET}`], 1, "error: no API key ar_live_Zq8m…"],
    [["key", "revoke", "--key", `x${SECRET}`], 1, "error: no API key xar_live_Zq8m…"],
    [["widget-key", "revoke", "--key", SECRET], 1, "error: no widget key ar_live_Zq8m…"],
    [["key", "create", "--org", SECRET], 1, "error: no organization ar_live_Zq8m…"],
    [["key", "list", "--org", SECRET], 1, "error: no organization ar_live_Zq8m…"],
    [["credits", "show", "--org", SECRET], 1, "error: no organization ar_live_Zq8m…"],
    [["agent", "create", "--org", SECRET, "--name", "A"], 1, "error: no organization ar_live_Zq8m…"],
    [["widget-key", "create", "--agent", SECRET, "--origins", "https://a.example"], 1, "error: no agent ar_live_Zq8m…"],
    [["help", "key", "revoke", SECRET], 2, "error: unknown command 'ar_live_Zq8m…' ('revoke' has no subcommands)"],
    [["key", SECRET], 2, "error: unknown command 'ar_live_Zq8m…'"],
    [["help", "key", SECRET], 2, "error: unknown command 'ar_live_Zq8m…'"],
  ])("%j", async (argv, exitCode, stderr) => {
    const res = await run(...argv);
    expect(res).toEqual({ exitCode, stderr });
    expect(JSON.stringify(res)).not.toContain(SECRET);
  });

  it("still names a publishable widget key it does not know in full", async () => {
    const key = "pk_000000000000000000000000";
    expect(await run("widget-key", "revoke", "--key", ` ${key} `)).toEqual({ exitCode: 1, stderr: `error: no widget key ${key}` });
  });
});

describe("an empty option value", () => {
  it.each([
    [["key", "create", "--org", ""], "--org"],
    [["key", "list", "--org", "  "], "--org"],
    [["key", "revoke", "--key", ""], "--key"],
    [["key", "revoke", "--key", " \r"], "--key"],
    [["key", "revoke", "--key", "Bearer "], "--key"],
    [["key", "revoke", "--key", " bearer\t\r"], "--key"],
    [["widget-key", "revoke", "--key", "Bearer"], "--key"],
    [["credits", "add", "--org", "", "--amount", "5"], "--org"],
    [["credits", "show", "--org", ""], "--org"],
    [["agent", "create", "--org", "", "--name", "A"], "--org"],
    [["widget-key", "create", "--agent", "", "--origins", "https://a.example"], "--agent"],
    [["widget-key", "revoke", "--key", ""], "--key"],
  ])("%j is a usage error (exit 2)", async (argv, flag) => {
    expect(await run(...argv)).toEqual({ exitCode: 2, stderr: `error: ${flag} must not be empty` });
  });
});

describe("a text option's length", () => {
  it("counts characters (code points), not UTF-16 units", async () => {
    const name = "\u{1F600}".repeat(200);
    const { org_id: orgId } = await ok("org", "create", "--name", name);
    expect((await cli.prisma.organization.findUniqueOrThrow({ where: { id: orgId } })).name).toBe(name);
    expect(await run("org", "create", "--name", `${name}x`)).toEqual({ exitCode: 2, stderr: "error: --name must be at most 200 characters" });
  });
});
