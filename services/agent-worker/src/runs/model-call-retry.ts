import { setTimeout as sleep } from "node:timers/promises";
import { AnswerCutOff } from "./completion-chunks";
import { callModel, type ModelCallOptions, type ModelTurn } from "./model-call";
import { defaultBackoffMs } from "./model-retry";
import { RunFailure, stopReasonOf, stoppedFailure } from "./run-failure";

/**
 * {@link callModel}, asked again when the connection to the model broke after it accepted the
 * request and before it streamed any event (a proxy that answered 200 and then dropped the
 * stream): nothing of that answer reached the run, so a new request loses nothing. Such a break
 * is retried up to `maxRetries` times, after callModel's own back-off, within the call's
 * `timeoutMs` (every attempt's time counts); each broken attempt reports its usage, as any
 * accepted call does (the model may have read the prompt). A break after the answer began, or a
 * body that cannot be decoded, fails the call as before.
 */
export async function callModelRetryingBreaks(opts: ModelCallOptions): Promise<ModelTurn> {
  const started = Date.now();
  const timeLeft = () => opts.timeoutMs - (Date.now() - started);
  for (let retry = 0; ; retry++) {
    try {
      return await callModel({ ...opts, timeoutMs: Math.max(1, timeLeft()) });
    } catch (err) {
      if (!brokeBeforeAnswer(err) || retry >= opts.maxRetries || opts.signal.aborted) throw err;
      const wait = defaultBackoffMs(retry);
      if (wait >= timeLeft()) throw err;
      try {
        await sleep(wait, undefined, { signal: opts.signal });
      } catch (stopped) {
        throw stoppedFailure(stopReasonOf(opts.signal) ?? "cancel", stopped);
      }
    }
  }
}

/** Whether `err` is a call's failure because its connection broke before the first streamed event. */
function brokeBeforeAnswer(err: unknown): boolean {
  const cause = err instanceof RunFailure ? err.cause : undefined;
  return cause instanceof AnswerCutOff && cause.events === 0 && !cause.undecodable;
}
