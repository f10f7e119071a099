/**
 * Errors that the CLI reports as one `error: …` line. Which class is thrown decides the exit
 * code, so scripts can tell a mistyped command (2) from a failed operation (1).
 */

/** Exit code for a command line that cannot be run as written. */
export const EXIT_USAGE = 2;
/** Exit code for a well-formed command that failed (unknown id, database down, …). */
export const EXIT_FAILURE = 1;

/** The command line is wrong: an unknown command, a missing option or a bad option value. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** The command refers to something that does not exist, e.g. `--org org_…` of no organization. */
export class NotFoundError extends Error {
  override name = "NotFoundError";
}
