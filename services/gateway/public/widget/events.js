import { EventSourceParserStream } from "eventsource-parser/stream";

/** The gateway's ping interval when a stream does not say (X-Heartbeat-Interval-Ms): its default. */
const DEFAULT_HEARTBEAT_MS = 14000;
/** Pings a stream may miss in a row before it counts as lost. */
const MISSED_PINGS = 3;
/** The ping interval the gateway's last stream gave: it also bounds the wait for a stream's headers. */
let knownHeartbeatMs = DEFAULT_HEARTBEAT_MS;

/** How long a stream, or the answer that starts it, may stay silent before it counts as lost. */
export function silenceLimitMs() {
  return MISSED_PINGS * knownHeartbeatMs;
}

/**
 * Reads a text/event-stream body, calling `onEvent` with each event's JSON (events whose data is
 * not JSON are skipped) until it returns true, which cancels the body. True when it asked to stop,
 * false when the stream ended first; a connection lost mid-stream rejects. So does a stream that
 * brings neither an event nor the gateway's `: ping` for MISSED_PINGS ping intervals: a proxy, or
 * a connection that died without a word, holding it open would otherwise keep the answer waiting
 * until the network gave up, which can take many minutes.
 */
export async function readEvents(res, onEvent) {
  if (!res.body) return false;
  const declared = Number(res.headers.get("X-Heartbeat-Interval-Ms"));
  if (Number.isInteger(declared) && declared > 0) knownHeartbeatMs = declared;
  const idleMs = silenceLimitMs();
  let heardAt = Date.now();
  let silent = false;
  const heard = () => (heardAt = Date.now());
  const parser = new EventSourceParserStream({ onComment: heard });
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(parser).getReader();
  // Checked when due rather than reset on every event; a timer a background tab delays only checks late.
  let watchdog = null;
  const watch = () => {
    const quietMs = Date.now() - heardAt;
    if (quietMs < idleMs) {
      watchdog = setTimeout(watch, idleMs - quietMs);
      return;
    }
    silent = true;
    reader.cancel().catch(() => {});
  };
  watchdog = setTimeout(watch, idleMs);
  try {
    for (;;) {
      const next = await reader.read();
      if (silent) throw new Error("the event stream went silent");
      if (next.done) return false;
      heard();
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
  } finally {
    clearTimeout(watchdog);
  }
}

/** The wait a refusal asks for in Retry-After (seconds or an HTTP date), in ms; 0 without one. */
export function retryAfterMs(res) {
  const v = res.headers.get("Retry-After");
  const ms = !v ? 0 : /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - Date.now();
  return ms > 0 ? ms : 0;
}
