import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { storableText } from "@agentrun/db";
import type { CutFinishReason } from "@agentrun/contracts";
import { cutReasonOf, FAILED_FINISH_REASONS, reasoningOf, refusalOf, refuseStreamOptions, refusesStreamOptions, sendsStreamOptions } from "./provider-quirks";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { untilAborted } from "../until-aborted";
import { completionChunks, type AnswerEnd, type StreamedResponse } from "./completion-chunks";
import { modelFailure, stopReasonOf, stoppedFailure, RunFailure } from "./run-failure";
import { retryWaitMs } from "./model-retry";
import { ToolCallDeltas, type ModelToolCall } from "./tool-call-deltas";
import { estimateUsage, type ModelUsage } from "./usage-estimate";
import { DRAIN_AFTER_DONE_MS, DRAIN_AFTER_FINISH_MS, MAX_ANSWER_CHARS, MAX_REASONING_CHARS, MAX_TOOL_CALLS_PER_ANSWER, reportedTokens } from "./model-limits";

export type { ModelToolCall } from "./tool-call-deltas";
export type { ModelUsage } from "./usage-estimate";

export interface ModelTurn {
  text: string;
  toolCalls: ModelToolCall[];
  /** Set when the model ended its answer early: at its token limit, or by its content filter. */
  cutShort?: CutFinishReason;
  /**
   * The reasoning a thinking model streamed beside its answer (`reasoning_content`, DeepSeek):
   * sent back with the answer's tool calls, as it requires within a turn. Never part of the run's text.
   */
  reasoning?: string;
}

export interface ModelCallOptions {
  client: OpenAI;
  model: string;
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
  temperature?: number | null;
  /** Aborted on cancel or shutdown (reason "cancel" / "shutdown"). */
  signal: AbortSignal;
  /** Longest the whole call may take, its retries included. */
  timeoutMs: number;
  /** Longest wait for the first or next streamed chunk. */
  idleTimeoutMs: number;
  maxRetries: number;
  onText: (delta: string) => void;
  /**
   * Called once per call that consumed tokens, even when the call is then stopped (cancel,
   * shutdown) after the model accepted it (its response headers arrived). When the model reported
   * no usage (a stop before its last chunk, or a provider that ignores `include_usage`), reports
   * an estimate.
   */
  onUsage: (usage: ModelUsage) => void;
}

/**
 * One streamed chat completion: forwards text deltas as they arrive, assembles tool calls, and
 * reports token usage. Stops with `model_timeout` when no chunk arrives within the idle timeout,
 * or when the call as a whole (request, retries and the waits before them, headers and the
 * streamed body) has not ended within `timeoutMs`: a retry gets what is left of that time.
 * Refusals are retried up to `maxRetries` times (see {@link retryWaitMs}), after the wait the
 * model asks for; one whose wait is longer than the call has left is the call's failure at once
 * (`model_rate_limited` for a 429). No idle timeout runs during a wait.
 * A call that ends without the model's usage (stopped before the last chunk, which carries it,
 * or answered by a provider that ignores `include_usage`) reports an estimate of what it
 * consumed: the prompt it read and the answer it streamed, at four characters per token. A call
 * stopped once the model accepted it (its response headers arrived) reports its estimate even
 * before the first chunk: the model is reading the prompt. One stopped before reports nothing:
 * its request may never have reached the model.
 */
export async function callModel(opts: ModelCallOptions): Promise<ModelTurn> {
  const started = Date.now();
  const timeLeft = () => opts.timeoutMs - (Date.now() - started);
  const idle = new AbortController();
  // The idle countdown's starts, restarts and stops: an expired one aborts the call only if none
  // came since. A process that stalled past the idle timeout (SIGSTOP, a frozen VM, a long
  // synchronous task) runs the expired timer before it reads the chunks that came meanwhile: the
  // abort waits for that read (one turn of I/O), where a chunk restarts the countdown instead.
  let idleArmings = 0;
  const onIdle = () => {
    const armed = idleArmings;
    setImmediate(() => void (armed === idleArmings && idle.abort("idle_timeout")));
  };
  const startIdle = () => (idleArmings++, setTimeout(onIdle, opts.idleTimeoutMs));
  let idleTimer = startIdle();
  const stopIdle = () => void (idleArmings++, clearTimeout(idleTimer));
  // Set once the answer has ended ([DONE], or a finish_reason): what follows is only read for a
  // while (see DRAIN_AFTER_DONE_MS), and a response cut off then leaves the answer whole.
  let ended = false;
  // Restarts the idle countdown (cheaper than a new timer for every chunk; it restarts one that
  // has already fired too).
  const armIdle = () => {
    if (ended) return;
    idleArmings++;
    idleTimer.refresh();
  };
  const drained = new AbortController();
  let drainTimer: NodeJS.Timeout | undefined;
  // More of the answer after a finish_reason, in a chunk without one: a proxy that marked an
  // earlier chunk finished (some put a finish_reason on every chunk). The answer goes on, under
  // the idle timeout again, rather than being cut when the drain ends.
  const onAnswerResumed = () => {
    ended = false;
    clearTimeout(drainTimer);
    idleTimer = startIdle();
  };
  // A finish_reason on a piece of the answer may be a proxy's on every chunk: more is awaited as long as a pause may last.
  const drainMs = { done: DRAIN_AFTER_DONE_MS, finish: DRAIN_AFTER_FINISH_MS, "finish-with-answer": Math.max(DRAIN_AFTER_FINISH_MS, opts.idleTimeoutMs) };
  const onAnswerEnd = (how: AnswerEnd) => {
    ended = true;
    stopIdle();
    clearTimeout(drainTimer);
    drainTimer = setTimeout(() => drained.abort("drained"), drainMs[how]);
  };
  // The SDK's own timeout stops at the response headers: this one bounds the call, its retries
  // included, to its last chunk.
  const deadline = new AbortController();
  const deadlineTimer = setTimeout(() => deadline.abort("call_timeout"), opts.timeoutMs);
  // Aborted when the call ends, however it ends. Node keeps a combined signal that has a listener
  // for as long as it may still abort: this lets it go whatever still listens (when the SDK
  // listened on it for good, every call left about 2 KB behind).
  const callEnded = new AbortController();
  const signal = AbortSignal.any([opts.signal, idle.signal, deadline.signal, drained.signal, callEnded.signal]);
  // What the SDK is given: the call's signal, relayed while the call lasts. The SDK answers an
  // abort with an abort of its own without a reason, which makes a DOMException (its stack
  // captured) per call: a call whose response ended by itself is not aborted at all.
  const sdkCall = new AbortController();
  const relay = () => sdkCall.abort(signal.reason);
  if (signal.aborted) relay();
  else signal.addEventListener("abort", relay, { once: true });
  // Set once the response's body has ended: nothing is left open to cut.
  let bodyEnded = false;
  const turn: ModelTurn = { text: "", toolCalls: [] };
  const calls = new ToolCallDeltas(MAX_TOOL_CALLS_PER_ANSWER);
  // The usage object of the model's last chunk that had one, as it came.
  let reported: { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
  // Set once the response headers arrived: the model accepted the request and reads its prompt.
  let accepted = false;
  // A high surrogate ending a delta, held back until the next delta brings its pair.
  let pendingHigh = "";
  // Once per call: the model's usage, or the estimate for what it sent none of (or nothing usable:
  // a model endpoint's numbers become credits and stored counts only when they are counts).
  let usageReported = false;
  const reportUsage = () => {
    if (usageReported) return;
    usageReported = true;
    const prompt = reportedTokens(reported?.prompt_tokens);
    const completion = reportedTokens(reported?.completion_tokens);
    if (prompt !== null && completion !== null) return opts.onUsage({ promptTokens: prompt, completionTokens: completion });
    const estimate = estimateUsage(opts.messages, turn.text, calls.calls);
    opts.onUsage({ promptTokens: prompt ?? estimate.promptTokens, completionTokens: completion ?? estimate.completionTokens });
  };
  const forward = (raw: string) => {
    // The text is stored as it streams: PostgreSQL takes no U+0000 and jsonb no lone surrogate.
    const text = storableText(raw);
    if (!text) return;
    if (turn.text.length + text.length > MAX_ANSWER_CHARS) throw new RunFailure("model_bad_response", `The model sent more than ${MAX_ANSWER_CHARS} characters of text in one answer.`);
    turn.text += text;
    opts.onText(text);
  };
  try {
    const body: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming = {
      model: opts.model,
      messages: opts.messages,
      tools: opts.tools.length ? opts.tools : undefined,
      temperature: opts.temperature ?? undefined,
      stream: true,
      ...(sendsStreamOptions(opts.client, opts.model) && { stream_options: { include_usage: true } }),
    };
    let response: Response;
    for (let retry = 0; ; retry++) {
      try {
        response = await untilAborted(opts.client.chat.completions.create(body, { signal: sdkCall.signal, timeout: Math.max(1, timeLeft()), maxRetries: 0 }).asResponse(), signal);
        break;
      } catch (err) {
        // Asked again at once without the field, not counted as a retry.
        if (body.stream_options && refusesStreamOptions(err)) {
          refuseStreamOptions(opts.client, opts.model);
          delete body.stream_options;
          retry--;
          continue;
        }
        const wait = retry < opts.maxRetries && !signal.aborted ? retryWaitMs(err, retry) : null;
        if (wait === null) throw err;
        // A wait the call has no time left for: the model's refusal is the answer.
        if (wait >= timeLeft()) throw modelFailure(err, opts.idleTimeoutMs);
        // The model asked for the wait: it is not the model being idle.
        stopIdle();
        await sleep(wait, undefined, { signal: AbortSignal.any([opts.signal, deadline.signal]) });
        idleTimer = startIdle();
      }
    }
    accepted = true;
    for await (const chunks of completionChunks(response as unknown as StreamedResponse, undefined, onAnswerEnd, onAnswerResumed)) {
      armIdle();
      for (const chunk of chunks) {
        if (chunk.usage && typeof chunk.usage === "object") reported = chunk.usage;
        const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
        const delta = choice?.delta;
        const finish: unknown = choice?.finish_reason;
        const cut = cutReasonOf(finish);
        if (cut) turn.cutShort = cut;
        else if (typeof finish === "string" && FAILED_FINISH_REASONS.has(finish)) {
          throw new RunFailure("model_error", "The model ended its answer with an error.", { detail: `finish_reason: ${finish}` });
        }
        const reasoning = reasoningOf(delta);
        if (reasoning) {
          turn.reasoning = (turn.reasoning ?? "") + reasoning;
          if (turn.reasoning.length > MAX_REASONING_CHARS) throw new RunFailure("model_bad_response", `The model sent more than ${MAX_REASONING_CHARS} characters of reasoning in one answer.`);
        }
        const text = deltaText(delta?.content) || refusalOf(delta);
        if (delta?.tool_calls && !Array.isArray(delta.tool_calls)) throw new RunFailure("model_bad_response", "The model sent tool calls that are not a list.");
        if (text) {
          const content = pendingHigh + text;
          const last = content.charCodeAt(content.length - 1);
          pendingHigh = last >= 0xd800 && last <= 0xdbff ? content.slice(-1) : "";
          forward(pendingHigh ? content.slice(0, -1) : content);
        }
        for (const tc of delta?.tool_calls ?? []) {
          if (!tc || typeof tc !== "object") throw new RunFailure("model_bad_response", "The model sent a tool call that is not an object.");
          // (What the call consumed is reported by the catch below, as for any failure of an accepted call.)
          if (!calls.add(tc)) throw new RunFailure("model_bad_response", `The model requested more than ${MAX_TOOL_CALLS_PER_ANSWER} tool calls in one answer.`);
          const over = calls.overLimit();
          if (over) throw new RunFailure("model_bad_response", over);
        }
      }
    }
    bodyEnded = true;
    // A body cut by an abort may end without an error: check the signal explicitly. Past the
    // answer's end, only the run's own stop counts (the rest of the response was cut off).
    if (opts.signal.aborted || (signal.aborted && !ended)) throw signal.reason ?? new Error("aborted");
    forward(pendingHigh);
  } catch (err) {
    // A call the model accepted consumed its prompt, and what it streamed, however it ended: the
    // run's token counts include it (a failed run is not charged for it).
    if (accepted) reportUsage();
    const reason = stopReasonOf(opts.signal);
    if (reason) throw stoppedFailure(reason, err);
    if (idle.signal.aborted) throw new RunFailure("model_timeout", `The model sent nothing for ${opts.idleTimeoutMs} ms.`, { cause: err });
    if (deadline.signal.aborted) throw new RunFailure("model_timeout", `The model call took longer than ${opts.timeoutMs} ms.`, { cause: err });
    throw modelFailure(err, opts.idleTimeoutMs);
  } finally {
    stopIdle();
    clearTimeout(deadlineTimer);
    clearTimeout(drainTimer);
    signal.removeEventListener("abort", relay);
    if (!bodyEnded) sdkCall.abort("call_ended");
    callEnded.abort("call_ended");
  }
  reportUsage();
  turn.toolCalls = withUniqueIds(calls.calls, idsIn(opts.messages));
  if (turn.toolCalls.some((c) => !c.name)) throw new RunFailure("model_bad_response", "The model requested a tool call without a name.");
  return turn;
}

/**
 * The text of a delta's `content`: a string, or the `text` parts of a list of parts, as Mistral's
 * reasoning models stream theirs (`[{type: "thinking", …}]`, then `[{type: "text", text}]`; parts
 * of other types are not the answer). Anything else fails the call.
 */
function deltaText(content: unknown): string {
  if (content === undefined || content === null || typeof content === "string") return content ?? "";
  if (!Array.isArray(content)) throw new RunFailure("model_bad_response", "The model sent an answer delta that is not text.");
  let text = "";
  for (const part of content) if (part && typeof part === "object" && part.type === "text" && typeof part.text === "string") text += part.text;
  return text;
}

/**
 * The calls in order, each with an id of its own in the conversation: the model's, or
 * `call_<position>` where it sent none or repeated one (its results go back to it by id, and a
 * provider refuses a conversation that answers one id twice), with a suffix where that too is
 * taken, by this answer or by an earlier call of the conversation (`used`).
 */
function withUniqueIds(calls: ModelToolCall[], used: Set<string>): ModelToolCall[] {
  const taken = new Set([...used, ...calls.map((c) => c.id)]);
  const seen = new Set<string>(used);
  return calls.map((c, index) => {
    let id = c.id;
    if (!id || seen.has(id)) {
      id = `call_${index}`;
      for (let n = 2; taken.has(id) || seen.has(id); n++) id = `call_${index}_${n}`;
    }
    seen.add(id);
    return { ...c, id };
  });
}

/** The ids of the tool calls the conversation sent so far. */
function idsIn(messages: ChatCompletionMessageParam[]): Set<string> {
  const ids = new Set<string>();
  for (const m of messages) if (m.role === "assistant") for (const c of m.tool_calls ?? []) ids.add(c.id);
  return ids;
}
