import OpenAI from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import { reasoningOf, refusalOf } from "./provider-quirks";

/** What is read of a streamed completion's response: its body and headers. */
export interface StreamedResponse {
  body: AsyncIterable<Uint8Array | string> | null;
  headers: Headers;
}

/**
 * Most characters one streamed event may hold while it is being read (a line without its end,
 * or an event without its closing blank line): a model that never ends one fails the call
 * instead of filling the worker's memory.
 * @defaultValue 8 MiB
 */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024;

/**
 * The chunks of a streamed chat completion, decoded from the response body as it arrives. The
 * chunks of each read of the body come as one array, so a consumer awaits once per read of the
 * connection rather than once per chunk; a read that completed no event (a comment, part of an
 * event) comes as an empty one, so that the consumer sees the connection alive.
 *
 * Decoding follows the SDK's own stream (`Stream.fromSSEResponse`), which this replaces on the
 * hot path (the SDK still makes the request: headers, retries, timeouts, error statuses). That
 * one runs each chunk through a chain of async generators and copies its buffer on every read:
 * a 20-chunk answer read whole cost the worker 0.61-0.74 ms of CPU through it and 0.36-0.38 ms
 * here, 20 chunks 20 ms apart 2.6-2.85 ms and 2.3-2.6 ms (64 calls at once, the scripted
 * model, interleaved runs). As there,
 * `data: [DONE]` ends the answer (what follows is read and ignored, so that the connection can be
 * reused; `onAnswerEnd` is told, as at each `finish_reason`, so that the caller can bound that
 * read; `onAnswerResumed` when more of the answer follows a finish_reason after all), a chunk
 * whose JSON does not parse throws `SyntaxError`, and one carrying `error` (or an event named
 * `error`) throws the SDK's `APIError`, each after the good chunks before it. The SSE framing is
 * read by `eventsource-parser`.
 *
 * Unlike there, an answer must end as a stream ends: with `[DONE]` or a chunk whose choice has a
 * `finish_reason`. A body that ends before either (a proxy that answered the whole completion as
 * JSON, an error page) throws `SyntaxError` after the chunks it held, and a connection that breaks
 * before either throws {@link AnswerCutOff}, so half an answer, or none, never passes for the
 * model's answer. A connection that breaks after the answer's end (in the usage chunk that follows
 * a finish_reason, or after `[DONE]`) leaves the answer whole, and so does an error reported
 * there. A chunk that is not a JSON object throws `SyntaxError`.
 */
export async function* completionChunks(
  response: StreamedResponse,
  maxEventChars = MAX_EVENT_CHARS,
  onAnswerEnd?: (how: AnswerEnd) => void,
  onAnswerResumed?: () => void,
): AsyncGenerator<ChatCompletionChunk[]> {
  // A 2xx without a body (204, say) is not an event stream: a malformed answer, as one that held no chunk.
  if (!response.body) throw new SyntaxError("The model answered without a body instead of an event stream.");
  let done = false;
  let finished = false;
  let seen = 0;
  let events: EventSourceMessage[] = [];
  let overflow: ParseError | undefined;
  const parser = createParser({
    onEvent: (event) => events.push(event),
    onError: (err) => {
      if (err.type === "max-buffer-size-exceeded") overflow = err;
      // llama.cpp's server reports a failure as a line of its own, `error: {…}`, in its place
      // among the events: it is taken as an event named error.
      else if (err.type === "unknown-field" && err.field === "error") events.push({ event: "error", data: err.value ?? "", id: undefined });
    },
    maxBufferSize: maxEventChars,
  });
  // The chunks of one read, as far as they are good, and the error of the first bad one.
  const take = (read: EventSourceMessage[]): { chunks: ChatCompletionChunk[]; failure?: Error } => {
    seen += read.length;
    const chunks: ChatCompletionChunk[] = [];
    for (const { data, event } of read) {
      if (done) continue;
      // An event without data (`data:` alone, a proxy's keep-alive, `event: ping` with an empty
      // `data:`) is skipped, as an EventSource dispatches none; one named error still fails.
      if (data === "" && event !== "error") continue;
      if (data.startsWith("[DONE]")) {
        done = true;
        onAnswerEnd?.("done");
        continue;
      }
      try {
        // An error reported after a finish_reason comes after the answer's end: the answer stays
        // whole, as when the connection breaks there.
        if (event === "error") {
          if (finished) continue;
          throw streamedError(data, response.headers);
        }
        const chunk = JSON.parse(data) as ChatCompletionChunk & { error?: object };
        if (chunk === null || typeof chunk !== "object" || Array.isArray(chunk)) throw new SyntaxError("A streamed chunk is not a JSON object.");
        if (chunk.error) {
          if (finished) continue;
          throw new OpenAI.APIError(undefined, chunk.error, undefined, response.headers);
        }
        // Each finish_reason is told (a proxy may put one on every chunk); more of the answer
        // in a chunk without one means the answer had not ended after all.
        if (Array.isArray(chunk.choices) && chunk.choices.some((c) => c?.finish_reason)) {
          finished = true;
          onAnswerEnd?.(answerGoesOn(chunk) ? "finish-with-answer" : "finish");
        } else if (finished && answerGoesOn(chunk)) {
          finished = false;
          onAnswerResumed?.();
        }
        chunks.push(chunk);
      } catch (err) {
        return { chunks, failure: err as Error };
      }
    }
    return { chunks };
  };
  const decoder = new TextDecoder();
  // What reading the body threw (the connection reset or closed, the call aborted), as opposed
  // to what this decoding throws itself (`refused`).
  let broken: unknown;
  let refused: Error | undefined;
  try {
    for await (const part of response.body) {
      parser.feed(typeof part === "string" ? part : decoder.decode(part, { stream: true }));
      if (overflow) throw (refused = new SyntaxError(`A streamed event exceeded ${maxEventChars} characters.`, { cause: overflow }));
      // A read without a whole event (a keep-alive comment such as OpenRouter's `: OPENROUTER
      // PROCESSING`, part of a long chunk) shows the model at work all the same: an empty array.
      if (events.length === 0) {
        yield [];
        continue;
      }
      const read = take(events);
      events = [];
      // The chunks that came before a bad one in the same read are the model's answer so far:
      // they are given first, and the error thrown when the consumer asks for more.
      if (read.chunks.length > 0) yield read.chunks;
      if (read.failure) throw (refused = read.failure);
    }
  } catch (err) {
    if (err === refused) throw err;
    broken = err ?? new Error("the response body failed");
  }
  if (!done) {
    // A last event without its closing blank line (`data: [DONE]` as the body's last bytes, the
    // usage chunk after a finish_reason) is read as if its line and event ended there; one cut
    // short is the answer cut short, unless a finish_reason had ended the answer already.
    parser.feed(`${decoder.decode()}\n\n`);
    const read = take(events);
    if (read.chunks.length > 0) yield read.chunks;
    if (read.failure && !(read.failure instanceof SyntaxError)) throw read.failure;
    if (!done && !finished) {
      if (broken !== undefined) throw new AnswerCutOff(seen, broken);
      throw new SyntaxError(unfinished(seen, response.headers.get("content-type")), { cause: read.failure });
    }
  }
}

/** The error an event named `error` reports: its JSON's `error` object, its JSON, or its text as the message. */
function streamedError(data: string, headers: Headers): InstanceType<typeof OpenAI.APIError> {
  let body: unknown;
  try {
    body = JSON.parse(data);
  } catch {
    body = undefined;
  }
  const error = body && typeof body === "object" ? ((body as { error?: unknown }).error ?? body) : data;
  // A bare text (not JSON, or an `error` that is a string) is the error's message.
  const object = error && typeof error === "object" ? error : { message: typeof error === "string" && error ? error : "The model sent an error event." };
  return new OpenAI.APIError(undefined, object, undefined, headers);
}

/**
 * How an answer's end was told: `[DONE]`, a `finish_reason` in a chunk that carries none of the
 * answer (as OpenAI ends one), or one in a chunk that carries more of it (a provider that ends
 * with its last piece, or a proxy that marks every chunk finished: more may come).
 */
export type AnswerEnd = "done" | "finish" | "finish-with-answer";

/** Whether a chunk carries more of the answer: text, a refusal, reasoning or tool calls. */
function answerGoesOn(chunk: ChatCompletionChunk): boolean {
  const delta = (Array.isArray(chunk.choices) ? chunk.choices[0]?.delta : undefined) as Record<string, unknown> | undefined;
  if (!delta || typeof delta !== "object") return false;
  const calls = delta.tool_calls;
  return Boolean(delta.content || refusalOf(delta) || reasoningOf(delta) || (Array.isArray(calls) && calls.length > 0));
}

/** The connection to the model broke (reset, closed, timed out) before the answer's end. */
export class AnswerCutOff extends Error {
  /** Whether the bytes could not be decoded (zlib's Z_DATA_ERROR, …: not what the answer's Content-Encoding says), rather than the connection breaking. */
  readonly undecodable: boolean;

  constructor(
    /** The streamed events read before the break. */
    readonly events: number,
    cause: unknown,
  ) {
    super(`The connection broke after ${events} streamed event(s), before the answer's end: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "AnswerCutOff";
    this.undecodable = /^Z_/.test(String((cause as { code?: unknown } | undefined)?.code ?? ""));
  }
}

/** Why an answer that ended without its end is refused, as the run's error detail. */
function unfinished(events: number, contentType: string | null): string {
  if (events > 0) return "The streamed answer ended before its end ([DONE] or a finish_reason).";
  if (!contentType?.startsWith("text/event-stream")) return `The model answered ${contentType ?? "without a content type"} instead of an event stream.`;
  return "The streamed answer held no chunk.";
}
