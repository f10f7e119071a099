import { spawn } from "node:child_process";
import { REPO_ROOT } from "@agentrun/db";
import { testCli } from "./cli-fixture";

// The CLI as its own process whose stdout or stderr is a pipe nobody reads any more, as in
// `cli key create … | head -0`: one error line and an exit code, never Node's stack trace.
const cli = testCli();

interface Outcome {
  status: number | null;
  /** What the CLI wrote on the stream that stayed open. */
  output: string;
}

/** Runs the CLI with `closed` (stdout or stderr) a pipe whose reading end is closed at once. */
function runWithClosed(closed: "stdout" | "stderr", ...args: string[]): Promise<Outcome> {
  const child = spawn(process.execPath, [require.resolve("tsx/cli"), "services/admin-cli/src/index.ts", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child[closed].destroy();
  const open = closed === "stdout" ? child.stderr : child.stdout;
  let output = "";
  open.setEncoding("utf8").on("data", (s: string) => void (output += s));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  return new Promise((resolve) => {
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, output });
    });
  });
}

async function newOrg(): Promise<string> {
  return (await cli.ok("org", "create", "--name", `org-${Math.random().toString(36).slice(2)}`)).org_id as string;
}

describe("a closed stdout", () => {
  it("after key create: one error line naming the created key, exit 1, and the key exists", async () => {
    const orgId = await newOrg();
    const res = await runWithClosed("stdout", "key", "create", "--org", orgId, "--name", "piped");
    expect(res.status).toBe(1);
    const match = /^error: the result could not be written \(stdout closed\), but the command's change was made: API key (key_\w+) was created, and its secret is lost with the result: revoke it with `key revoke --key \1`\n$/.exec(res.output);
    expect(match).not.toBeNull();
    expect(res.output).not.toContain("ar_live_");
    const key = await cli.prisma.apiKey.findUniqueOrThrow({ where: { id: match![1]! } });
    expect(key).toMatchObject({ orgId, name: "piped", revokedAt: null });
  });

  it("after a command that writes: says what was changed", async () => {
    const orgId = await newOrg();
    const res = await runWithClosed("stdout", "credits", "add", "--org", orgId, "--amount", "5");
    expect(res).toEqual({
      status: 1,
      output: `error: the result could not be written (stdout closed), but the command's change was made: 5 credits were added to ${orgId}, balance 1005\n`,
    });
    expect((await cli.prisma.organization.findUniqueOrThrow({ where: { id: orgId } })).creditBalance).toBe(1005);
  });

  it("after a command that only reads (or --help): says that nothing was changed", async () => {
    const orgId = await newOrg();
    const line = "error: the result could not be written (stdout closed); nothing was changed\n";
    expect(await runWithClosed("stdout", "credits", "show", "--org", orgId)).toEqual({ status: 1, output: line });
    expect(await runWithClosed("stdout", "org", "create", "--help")).toEqual({ status: 1, output: line });
  });
});

describe("a closed stderr", () => {
  it("leaves a failure's exit code as it is", async () => {
    expect(await runWithClosed("stderr", "bogus")).toEqual({ status: 2, output: "" });
    expect(await runWithClosed("stderr", "credits", "show", "--org", "org_missing")).toEqual({ status: 1, output: "" });
  });
});
