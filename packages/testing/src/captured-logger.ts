import pino, { type Logger } from "pino";
import type { LogLine } from "./processes";

/**
 * A pino logger at `level` whose JSON lines are parsed into `lines` as they are written: what a
 * service started in-process logs, for a test to read (see logLinesOf for a service's process).
 */
export function capturedLogger(level: pino.LevelWithSilent = "debug"): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}
