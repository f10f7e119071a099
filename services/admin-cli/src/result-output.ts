/**
 * Printing a {@link CliResult} on the process's stdout and stderr. Either stream may be closed by
 * the time the command has run (`cli key create … | head -0`): a write to it then fails, and
 * Node turns an unheard stream error into a stack trace. Here every such error is heard, and a
 * result that stdout did not take is reported as one error line, because the command may have
 * changed the database all the same.
 */
import { EXIT_FAILURE } from "./cli-errors";
import type { CliResult } from "./cli";

/**
 * Makes errors of stdout and stderr harmless: a failed write is seen by its own callback (stdout)
 * or has nowhere left to be reported (stderr). Call it before anything is written.
 */
export function hearStreamErrors(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
}

/** Writes `text` to stdout; resolves with the write's error, if any. */
function writeStdout(text: string): Promise<Error | null> {
  return new Promise((resolve) => {
    process.stdout.write(text, (err) => resolve(err ?? null));
  });
}

/** Writes one line to stderr; if stderr is closed there is no one left to tell. */
function writeStderrLine(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Why stdout took no result, for the error line: `stdout closed`, or the write's own error. */
function stdoutFailure(err: Error & { code?: string }): string {
  if (err.code === "EPIPE" || err.code === "ERR_STREAM_DESTROYED") return "stdout closed";
  return `stdout: ${err.code ?? err.message}`;
}

/**
 * The line printed when a successful command's result could not be written. It says whether the
 * database was changed, naming what was changed (but never a secret), so that the operator
 * neither repeats a command that took effect nor misses a key whose secret was lost with it.
 */
export function unwrittenResultLine(reason: string, change: string | undefined): string {
  if (change === undefined) return `error: the result could not be written (${reason}); nothing was changed`;
  return `error: the result could not be written (${reason}), but the command's change was made: ${change}`;
}

/**
 * Prints `result`: its JSON object on stdout then the `warnings` on stderr, or its error line on
 * stderr. Resolves with the exit code: the result's own, or {@link EXIT_FAILURE} when stdout
 * did not take the JSON object.
 */
export async function printResult(result: CliResult, warnings: readonly string[]): Promise<number> {
  if (!("stdout" in result)) {
    writeStderrLine(result.stderr);
    return result.exitCode;
  }
  const err = await writeStdout(`${JSON.stringify(result.stdout)}\n`);
  if (err) {
    writeStderrLine(unwrittenResultLine(stdoutFailure(err), result.change));
    return EXIT_FAILURE;
  }
  for (const line of warnings) writeStderrLine(line);
  return result.exitCode;
}
