import { testCli } from "./cli-fixture";

// How the command line is read: options given twice, the help command at every level, and
// `key revoke` given the secret key instead of its id.
const cli = testCli();
const { run, ok } = cli;

async function newOrg(): Promise<string> {
  return (await ok("org", "create", "--name", `org-${Math.random().toString(36).slice(2)}`)).org_id as string;
}

describe("an option given twice", () => {
  // Names of this file's own, so that organizations other test files create meanwhile do not count.
  const twice = `Twice-${Math.random().toString(36).slice(2)}`;
  const again = `Again-${Math.random().toString(36).slice(2)}`;
  it.each([
    [["org", "create", "--name", twice, "--plan", "free", "--plan", "pro"], "--plan"],
    [["org", "create", "--name", twice, "--name", again], "--name"],
    [["org", "create", "--name", twice, "--credits=5", "--credits", "5"], "--credits"],
  ])("%j is refused with exit 2 and creates no organization", async (argv, flag) => {
    expect(await run(...argv)).toEqual({ exitCode: 2, stderr: `error: ${flag} given twice` });
    expect(await cli.prisma.organization.count({ where: { name: { in: [twice, again] } } })).toBe(0);
  });

  it("is refused by every command before anything is written", async () => {
    const orgId = await newOrg();
    const other = await newOrg();
    expect(await run("credits", "add", "--org", orgId, "--amount", "5", "--amount", "7")).toEqual({ exitCode: 2, stderr: "error: --amount given twice" });
    expect(await ok("credits", "show", "--org", orgId)).toEqual({ balance: 1000 });
    expect(await run("key", "create", "--org", orgId, "--org", other)).toEqual({ exitCode: 2, stderr: "error: --org given twice" });
    expect(await cli.prisma.apiKey.count({ where: { orgId: { in: [orgId, other] } } })).toBe(0);
    expect(await run("agent", "create", "--org", orgId, "--name", "A", "--tools", "memory", "--tools", "calc")).toEqual({ exitCode: 2, stderr: "error: --tools given twice" });
    expect(await cli.prisma.agent.count({ where: { orgId } })).toBe(0);
  });
});

describe("an option whose value is missing before the next option", () => {
  const name = `Swallowed-${Math.random().toString(36).slice(2)}`;
  it.each([
    [["org", "create", "--plan", "pro", "--name", "--credits", "5"], "--name", "--credits"],
    [["org", "create", "--name", name, "--plan=--rpm"], "--plan", "--rpm"],
    [["agent", "create", "--org", "org_x", "--name", "A", "--model", "--instructions", "be brief"], "--model", "--instructions"],
    [["agent", "create", "--org", "org_x", "--name", "A", "--instructions", "--help"], "--instructions", "--help"],
    [["key", "create", "--org", "org_x", "--name", "--org"], "--name", "--org"],
    [["credits", "add", "--org", "--amount", "5"], "--org", "--amount"],
  ])("%j is refused with exit 2, naming both options", async (argv, flag, taken) => {
    expect(await run(...argv)).toEqual({ exitCode: 2, stderr: `error: ${flag} needs a value (got the option ${taken})` });
    expect(await cli.prisma.organization.count({ where: { name: { in: [name, "--credits"] } } })).toBe(0);
  });

  it("still takes a value that only starts with dashes", async () => {
    const orgId = await newOrg();
    const agent = await ok("agent", "create", "--org", orgId, "--name", "--- A ---", "--instructions", "-- be brief");
    expect(await cli.prisma.agent.findUniqueOrThrow({ where: { id: agent.agent_id } })).toMatchObject({ name: "--- A ---", instructions: "-- be brief" });
  });
});

describe("the help command", () => {
  it("answers `org help create` and `help org create` as `org create --help`", async () => {
    const expected = await ok("org", "create", "--help");
    expect(expected.help).toContain("Usage: cli org create [options]");
    expect(await ok("org", "help", "create")).toEqual(expected);
    expect(await ok("help", "org", "create")).toEqual(expected);
    expect(await ok("org", "help")).toEqual(await ok("org", "--help"));
  });

  it("answers `help help`, the help command named after itself, with its group's help", async () => {
    const general = await ok("--help");
    expect(general.help).toContain("help [command]");
    expect(await ok("help", "help")).toEqual(general);
    expect(await ok("org", "help", "help")).toEqual(await ok("org", "--help"));
    expect(await ok("help", "org", "help")).toEqual(await ok("org", "--help"));
    expect(await run("help", "help", "org")).toEqual({ exitCode: 2, stderr: "error: unknown command 'org' ('help' has no subcommands)" });
  });

  it("refuses a command it does not know, as that command would be refused", async () => {
    expect(await run("help", "org", "bogus")).toEqual(await run("org", "bogus"));
    expect(await run("org", "help", "bogus")).toEqual({ exitCode: 2, stderr: "error: unknown command 'bogus'" });
    expect(await run("help", "org", "create", "extra")).toEqual({ exitCode: 2, stderr: "error: unknown command 'extra' ('create' has no subcommands)" });
  });
});

describe("key revoke --key with the secret key", () => {
  it("revokes the key it hashes to and prints the key id", async () => {
    const orgId = await newOrg();
    const { key_id: keyId, api_key: apiKey } = await ok("key", "create", "--org", orgId);
    expect(await ok("key", "revoke", "--key", apiKey)).toEqual({ key_id: keyId, revoked: true });
    expect((await cli.prisma.apiKey.findUniqueOrThrow({ where: { id: keyId } })).revokedAt).toBeInstanceOf(Date);
  });

  it("never echoes a secret it does not know, only its display prefix", async () => {
    const secret = "ar_live_Zq8mN3pR7tV1xY4bC6dF9gH2jK5lM0nP";
    expect(await run("key", "revoke", "--key", secret)).toEqual({ exitCode: 1, stderr: "error: no API key ar_live_Zq8m…" });
    const truncated = secret.slice(0, 30);
    expect(await run("key", "revoke", "--key", truncated)).toEqual({
      exitCode: 2,
      stderr: "error: --key ar_live_Zq8m… is not a whole API key; give the key id (key_…) or the whole key",
    });
  });
});
