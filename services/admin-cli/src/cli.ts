/**
 * The admin CLI as a function: `runCli(argv, deps)` parses one command line, runs it and returns
 * what to print and the exit code. It never writes to the terminal or exits, so tests call it
 * in-process and `index.ts` only prints the result.
 */
import { Command, CommanderError } from "commander";
import { API_KEY_DISPLAY_PREFIX_LENGTH, API_KEY_PREFIX } from "@agentrun/api-keys";
import type { PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import { EXIT_FAILURE, EXIT_USAGE, NotFoundError, UsageError } from "./cli-errors";
import type { CliOutput, CommandContext } from "./command-context";
import { databaseErrorLine } from "./database-errors";
import { helpAsOption } from "./help-command";
import { guardOptionValues } from "./option-parsers";
import { registerAgentCommands } from "./commands/agent.command";
import { registerCreditsCommands } from "./commands/credits.command";
import { registerKeyCommands } from "./commands/key.command";
import { registerOrgCommands } from "./commands/org.command";
import { registerWidgetKeyCommands } from "./commands/widget-key.command";

/** Dependencies of {@link runCli}. */
export interface CliDeps {
  /**
   * The database. Read only once a command runs (not for `--help` or a usage error), so it may be
   * a getter that reads the environment and makes the client then.
   */
  readonly prisma: PrismaClient;
}

/**
 * Outcome of one command line: either one JSON object for stdout (exit 0), with what the command
 * changed if it did (see `CommandContext.emit`), or one line for stderr with the exit code (2 for
 * usage errors, 1 for failures).
 */
export type CliResult = { exitCode: 0; stdout: CliOutput; change?: string } | { exitCode: number; stderr: string };

/** Name shown in usage lines; the CLI is run as `npm run -s cli -- <command>`. */
const PROGRAM_NAME = "cli";

/**
 * Builds the commander program. Commander must not print or exit: its output is captured and
 * its errors are thrown, so that every outcome becomes exactly one JSON object or one line.
 * Settings are made before the subcommands are added because subcommands copy them.
 */
function buildProgram(ctx: CommandContext, captured: { out: string; err: string }): Command {
  const program = new Command(PROGRAM_NAME)
    .description("agentrun admin CLI: prints one JSON object on success, one `error:` line on stderr otherwise")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => void (captured.out += s),
      writeErr: (s) => void (captured.err += s),
      outputError: () => {},
    })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false);
  registerOrgCommands(program, ctx);
  registerKeyCommands(program, ctx);
  registerAgentCommands(program, ctx);
  registerWidgetKeyCommands(program, ctx);
  registerCreditsCommands(program, ctx);
  guardOptionValues(program);
  return program;
}

/**
 * A secret API key anywhere in a message, whole or mistyped (the commands' messages name the
 * values they were given, and commander repeats an unknown command): kept to its display prefix,
 * up to the next space or quote.
 */
const SECRET_KEY = new RegExp(`(${API_KEY_PREFIX}[A-Za-z0-9]{${API_KEY_DISPLAY_PREFIX_LENGTH - API_KEY_PREFIX.length}})[^\\s'"]+`, "g");

/**
 * Folds a possibly multi-line message onto one line, prefixed with `error: ` once. Every error
 * line passes here, so this is where secret keys are cut (see SECRET_KEY).
 */
export function oneLine(message: string): string {
  const flat = message.replace(/\s*\n\s*/g, " ").replace(SECRET_KEY, "$1…").trim();
  return flat.startsWith("error:") ? flat : `error: ${flat}`;
}

function fromCommanderError(err: CommanderError, captured: { out: string; err: string }): CliResult {
  if (err.code === "commander.helpDisplayed" || err.code === "commander.version") {
    // Help asked for explicitly is a successful command, so it too is one JSON object.
    return { exitCode: 0, stdout: { help: captured.out.trimEnd() } };
  }
  if (err.code === "commander.help") {
    // A command group without its subcommand, e.g. `cli org`: commander printed the help instead.
    const usage = /Usage: (.*)/.exec(captured.err)?.[1]?.trim() ?? PROGRAM_NAME;
    return { exitCode: EXIT_USAGE, stderr: `error: missing command; usage: ${usage} (see --help)` };
  }
  return { exitCode: EXIT_USAGE, stderr: oneLine(err.message) };
}

/** Maps any thrown value to the line and exit code the operator sees. */
export function errorResult(err: unknown): CliResult {
  if (err instanceof UsageError) return { exitCode: EXIT_USAGE, stderr: oneLine(err.message) };
  if (err instanceof NotFoundError) return { exitCode: EXIT_FAILURE, stderr: oneLine(err.message) };
  // The option parsers have checked every value by now: what a package refuses (a balance past
  // its limit, an unknown row) is a failed operation, not a command line that cannot run.
  if (err instanceof AppError) return { exitCode: EXIT_FAILURE, stderr: oneLine(err.message) };
  const databaseLine = databaseErrorLine(err);
  if (databaseLine) return { exitCode: EXIT_FAILURE, stderr: oneLine(databaseLine) };
  const message = err instanceof Error ? err.message : String(err);
  return { exitCode: EXIT_FAILURE, stderr: oneLine(message || "unexpected failure") };
}

/**
 * Runs one command line (`argv` without the node and script paths, e.g.
 * `["org", "create", "--name", "Acme"]`). Never throws.
 */
export async function runCli(argv: readonly string[], deps: CliDeps): Promise<CliResult> {
  let output: CliOutput | undefined;
  let change: string | undefined;
  const captured = { out: "", err: "" };
  const ctx: CommandContext = {
    get prisma() {
      return deps.prisma;
    },
    emit: (o, c) => {
      output = o;
      change = c;
    },
  };
  try {
    const program = buildProgram(ctx, captured);
    await program.parseAsync(helpAsOption(program, argv), { from: "user" });
  } catch (err) {
    return err instanceof CommanderError ? fromCommanderError(err, captured) : errorResult(err);
  }
  // Every leaf command emits; reaching here without output would be a command wired wrongly.
  if (output === undefined) return { exitCode: EXIT_FAILURE, stderr: "error: the command produced no result" };
  return change === undefined ? { exitCode: 0, stdout: output } : { exitCode: 0, stdout: output, change };
}
