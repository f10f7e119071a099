import { EventSourceParserStream } from "eventsource-parser/stream";

/**
 * Reads a text/event-stream body, calling `onEvent` with each event's JSON (events whose data is
 * not JSON are skipped) until it returns true, which cancels the body. True when it asked to stop,
 * false when the stream ended first; a connection lost mid-stream rejects.
 */
export async function readEvents(res, onEvent) {
  if (!res.body) return false;
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return false;
    let ev = null;
    try {
      ev = JSON.parse(next.value.data);
    } catch (e) {
      /* not ours: skip */
    }
    if (ev && onEvent(ev)) {
      reader.cancel().catch(() => {});
      return true;
    }
  }
}

/** The wait a refusal asks for in Retry-After (seconds or an HTTP date), in ms; 0 without one. */
export function retryAfterMs(res) {
  const v = res.headers.get("Retry-After");
  const ms = !v ? 0 : /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - Date.now();
  return ms > 0 ? ms : 0;
}
