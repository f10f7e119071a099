import OpenAI from "openai";

/** The error of a run whose worker stopped while executing it. */
export const WORKER_LOST = { code: "worker_lost", message: "The worker executing the run stopped." } as const;

/**
 * Why a run's work was stopped from outside the model call. `superseded`: someone else ended the
 * run or took it over (its log refused this worker's events); this worker must leave it alone.
 */
export type StopReason = "cancel" | "shutdown" | "idle_timeout" | "superseded";

/** BullMQ's reason for failing a job whose lock lapsed more often than it allows (`maxStalledCount`). */
const STALLED_TOO_OFTEN = /stalled more than allowable limit/;

/**
 * The error of a run whose job failed for good: `worker_lost` when BullMQ gave up on it because
 * the workers executing it kept stopping (its lock lapsed too often), `internal_error` otherwise
 * (infrastructure errors on every attempt).
 */
export function finalFailureOf(err: Error): { code: string; message: string } {
  if (STALLED_TOO_OFTEN.test(err.message)) return { ...WORKER_LOST, message: "The workers executing the run kept stopping." };
  return { code: "internal_error", message: "The run could not be executed." };
}

/** A failure that ends a run with a code the caller sees in `run_failed`. */
export class RunFailure extends Error {
  override name = "RunFailure";
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The reason a signal was aborted with, if it is one of ours. */
export function stopReasonOf(signal: AbortSignal | undefined): StopReason | null {
  const r = signal?.reason;
  return r === "cancel" || r === "shutdown" || r === "idle_timeout" || r === "superseded" ? r : null;
}

/** Maps a model call error to the run's error code and a message fit for the caller. */
export function modelFailure(err: unknown, idleTimeoutMs: number): RunFailure {
  if (err instanceof RunFailure) return err;
  if (err instanceof OpenAI.APIConnectionTimeoutError) return new RunFailure("model_timeout", "The model did not answer in time.", { cause: err });
  if (err instanceof OpenAI.APIUserAbortError) return new RunFailure("model_timeout", `The model sent nothing for ${idleTimeoutMs} ms.`, { cause: err });
  if (err instanceof OpenAI.APIError && err.status !== undefined) {
    const detail = (err.error as { message?: string } | undefined)?.message ?? err.message;
    if (err.status === 429) return new RunFailure("model_rate_limited", `The model refused the request as rate limited (429): ${detail}`, { cause: err });
    return new RunFailure("model_error", `The model answered ${err.status}: ${detail}`, { cause: err });
  }
  if (err instanceof OpenAI.APIConnectionError) return new RunFailure("model_error", "The model could not be reached.", { cause: err });
  if (err instanceof SyntaxError || (err instanceof OpenAI.OpenAIError && /JSON|parse/i.test(err.message))) {
    return new RunFailure("model_bad_response", "The model sent a malformed streaming response.", { cause: err });
  }
  return new RunFailure("model_error", `The model call failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}
