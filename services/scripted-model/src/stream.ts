/**
 * Delivery of a planned answer over Server-Sent Events, with the `[sleep]` and `[malformed]`
 * behaviours. Every wait is tied to an AbortSignal that fires when the client goes away, so an
 * abandoned stream stops writing and leaves no timer behind.
 */
import type { Response } from "express";
import { once } from "node:events";
import { setTimeout as delay } from "node:timers/promises";
import { DEFAULT_CHUNKS } from "./directives";
import { answerDeltas, chunkObject, finishReason, type CompletionMeta } from "./responses";
import type { Plan } from "./script";

/**
 * Waits `ms` milliseconds; resolves `false` instead when `signal` aborts first (the timer is then
 * cleared), `true` when the wait completed.
 */
export async function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (ms <= 0) return true;
  try {
    await delay(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** Resolves once `signal` aborts: the `[hang]` directive, which only ends with the connection. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

export interface StreamOptions {
  includeUsage: boolean;
  /** Aborts when the client disconnects. */
  signal: AbortSignal;
}

/**
 * Streams `plan` as `data: {chunk}` lines ending with `data: [DONE]`: the answer deltas (each
 * preceded by the `[sleep:MS]` wait), a broken line after the first delta for `[malformed]`, the
 * finishing chunk, and with `include_usage` a last chunk with empty `choices` and the usage;
 * for `[cut]`, the first delta alone, then the end of the body.
 * Resolves `true` when the stream was complete, `false` when the client went away first.
 */
export async function streamCompletion(res: Response, meta: CompletionMeta, plan: Plan, { includeUsage, signal }: StreamOptions): Promise<boolean> {
  res.status(200);
  res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
  res.setHeader("Cache-Control", "no-cache");
  res.setHeader("Connection", "keep-alive");
  res.flushHeaders();
  // Each chunk should leave as its own packet, as a real provider's would.
  res.socket?.setNoDelay(true);

  // At the client's pace: a full socket buffer is waited out, so that a stream of millions of
  // chunks ([chunks:N] over a long text) is never held in memory whole.
  const send = async (payload: unknown): Promise<boolean> => {
    if (signal.aborted || res.writableEnded) return false;
    if (res.write(`data: ${typeof payload === "string" ? payload : JSON.stringify(payload)}\n\n`)) return true;
    try {
      await once(res, "drain", { signal });
      return true;
    } catch {
      return false;
    }
  };

  const { directives } = plan;
  let i = -1;
  for (const delta of answerDeltas(plan.answer, directives.chunks ?? DEFAULT_CHUNKS)) {
    i += 1;
    if (!(await sleep(directives.sleepMs ?? 0, signal))) return false;
    if (!(await send(chunkObject(meta, { delta, finish_reason: null }, includeUsage)))) return false;
    if (i === 0 && directives.cut) {
      res.end();
      return true;
    }
    if (i === 0 && directives.malformed) {
      // A truncated chunk: valid SSE framing around invalid JSON.
      if (!(await send(JSON.stringify(chunkObject(meta, { delta, finish_reason: null }, includeUsage)).slice(0, 48)))) return false;
    }
  }
  if (!(await send(chunkObject(meta, { delta: {}, finish_reason: finishReason(plan) }, includeUsage)))) return false;
  if (includeUsage && !(await send(chunkObject(meta, null, true, plan.usage)))) return false;
  if (!(await send("[DONE]"))) return false;
  res.end();
  return true;
}
