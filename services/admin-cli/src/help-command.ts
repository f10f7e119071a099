/**
 * The `help [command]` that every command group lists, answered as `--help`. Commander's own help
 * command cannot serve here: it ends as a missing command once its output is captured, it takes
 * one name only (`cli help org create` would show `org`'s help) and it ignores names it does
 * not know (`cli help org bogus` would show `org`'s help too).
 */
import type { Command } from "commander";
import { UsageError } from "./cli-errors";

/** Name of the help command commander adds to every command with subcommands. */
const HELP = "help";

/**
 * Rewrites a command line whose command words lead to `help`, e.g. `org help create` or
 * `help org create`, into the same words with `--help`: `org create --help`. A name after `help`
 * that is not a command is handed to commander without `--help`, which refuses it as it refuses
 * `org bogus`. `help` named after `help` is the help command itself, listed in its group's help
 * (`help help` and `org help help` are `--help` and `org --help`); it has no subcommands. Any
 * other command line is returned as it is.
 */
export function helpAsOption(program: Command, argv: readonly string[]): string[] {
  let command = program;
  let at = 0;
  // Walk the command words until `help` or anything that is not a subcommand.
  for (; at < argv.length && argv[at] !== HELP; at++) {
    const sub = command.commands.find((c) => c.name() === argv[at]);
    if (!sub) return [...argv];
    command = sub;
  }
  if (at === argv.length || command.commands.length === 0) return [...argv];
  const words = argv.slice(0, at);
  const names = argv.slice(at + 1);
  for (const [i, name] of names.entries()) {
    if (command.commands.length === 0) throw new UsageError(`unknown command '${name}' ('${command.name()}' has no subcommands)`);
    if (name === HELP) {
      const extra = names[i + 1];
      if (extra !== undefined) throw new UsageError(`unknown command '${extra}' ('${HELP}' has no subcommands)`);
      break;
    }
    const sub = command.commands.find((c) => c.name() === name);
    words.push(name);
    if (!sub) return words;
    command = sub;
  }
  return [...words, "--help"];
}
