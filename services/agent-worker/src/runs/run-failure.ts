import OpenAI from "openai";
import { AnswerCutOff } from "./completion-chunks";

/** The error of a run whose worker stopped while executing it. */
export const WORKER_LOST = { code: "worker_lost", message: "The worker executing the run stopped." } as const;

/**
 * Why a run's work was stopped from outside the model call. `superseded`: someone else ended the
 * run or took it over (its log refused this worker's events); this worker must leave it alone.
 * `deadline`: the run took longer than RUN_TIMEOUT_MS.
 */
export type StopReason = "cancel" | "shutdown" | "idle_timeout" | "superseded" | "deadline";

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

/**
 * A failure that ends a run with a code the caller sees in `run_failed`. Its message is stored
 * with the run and streamed to the caller (an anonymous widget visitor, say): fixed text of ours,
 * never what a provider or a library wrote. That text, when there is some, is `detail`.
 */
export class RunFailure extends Error {
  override name = "RunFailure";
  /** What the outside world said about the failure (a provider's error text): for the worker's log only. */
  readonly detail?: string;
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown; detail?: string },
  ) {
    super(message, options);
    this.detail = options?.detail;
  }
}

/** The reason a signal was aborted with, if it is one of ours. */
/** The failure of work stopped for `reason` (a cancel, the worker's shutdown, …). */
export function stoppedFailure(reason: StopReason, cause: unknown): RunFailure {
  return new RunFailure(reason, `stopped: ${reason}`, { cause });
}

export function stopReasonOf(signal: AbortSignal | undefined): StopReason | null {
  const r = signal?.reason;
  return r === "cancel" || r === "shutdown" || r === "idle_timeout" || r === "superseded" || r === "deadline" ? r : null;
}

/** A provider's error code is shown to the caller only when it is a short identifier (`invalid_api_key`). */
const PROVIDER_CODE = /^[a-z0-9_.-]{1,64}$/i;

/** ` (code)` for a provider error whose `code` is an identifier; nothing for free text or no code. */
function codeSuffix(err: InstanceType<typeof OpenAI.APIError>): string {
  const code: unknown = err.code;
  const text = typeof code === "number" && Number.isInteger(code) ? String(code) : code;
  return typeof text === "string" && PROVIDER_CODE.test(text) ? ` (${text})` : "";
}

/** The text an error carries, for the log. */
const textOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * Maps a model call error to the run's error code and a fixed message fit for the caller: the
 * HTTP status and the provider's error code at most. A provider or proxy may echo the request
 * (its key included) in its error text, so that text goes to `detail`, for the worker's log.
 */
export function modelFailure(err: unknown, idleTimeoutMs: number): RunFailure {
  if (err instanceof RunFailure) return err;
  const detail = textOf(err);
  if (err instanceof OpenAI.APIConnectionTimeoutError) return new RunFailure("model_timeout", "The model did not answer in time.", { cause: err });
  if (err instanceof OpenAI.APIUserAbortError) return new RunFailure("model_timeout", `The model sent nothing for ${idleTimeoutMs} ms.`, { cause: err });
  if (err instanceof OpenAI.APIConnectionError) {
    return new RunFailure("model_error", "The model could not be reached.", { cause: err, detail: err.cause ? textOf(err.cause) : detail });
  }
  if (err instanceof OpenAI.APIError) {
    const code = codeSuffix(err);
    if (err.status === 429) return new RunFailure("model_rate_limited", `The model answered 429${code}: the request was rate limited.`, { cause: err, detail });
    if (err.status !== undefined) return new RunFailure("model_error", `The model answered ${err.status}${code}.`, { cause: err, detail });
    // An `error` object in a streamed chunk: the model failed while answering.
    return new RunFailure("model_error", `The model reported an error while answering${code}.`, { cause: err, detail });
  }
  if (err instanceof AnswerCutOff) {
    if (err.undecodable) {
      return new RunFailure("model_bad_response", "The model's answer was not what its Content-Encoding says.", { cause: err, detail });
    }
    return new RunFailure("model_bad_response", "The connection to the model broke before the answer's end.", { cause: err, detail });
  }
  if (err instanceof SyntaxError || (err instanceof OpenAI.OpenAIError && /JSON|parse/i.test(err.message))) {
    return new RunFailure("model_bad_response", "The model sent a malformed streaming response.", { cause: err, detail });
  }
  return new RunFailure("model_error", "The model call failed.", { cause: err, detail });
}
