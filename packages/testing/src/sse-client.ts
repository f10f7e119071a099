import { createParser, type EventSourceMessage } from "eventsource-parser";

export interface SseEvent {
  id?: string;
  data: any;
}

export interface SseResponse {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Comment lines seen (e.g. keepalive pings). */
  comments: string[];
  /** The body when the response was not an event stream (e.g. a JSON error). */
  body?: any;
}

export interface StreamOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Stop reading (and disconnect) once this returns true for an event. */
  until?: (e: SseEvent, all: SseEvent[]) => boolean;
  /** Give up after this long. @defaultValue 30000 */
  timeoutMs?: number;
}

/** Reads a Server-Sent Events response with a real HTTP client and a well-kept SSE parser. */
export async function readSse(url: string, opts: StreamOptions = {}): Promise<SseResponse> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error("SSE read timed out")), opts.timeoutMs ?? 30_000);
  try {
    const res = await fetch(url, {
      method: opts.method ?? (opts.body === undefined ? "GET" : "POST"),
      headers: { ...(opts.body === undefined ? {} : { "content-type": "application/json" }), ...opts.headers },
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: controller.signal,
    });
    const out: SseResponse = { status: res.status, headers: res.headers, events: [], comments: [] };
    if (!res.headers.get("content-type")?.startsWith("text/event-stream")) {
      const text = await res.text();
      try {
        out.body = JSON.parse(text);
      } catch {
        out.body = text;
      }
      return out;
    }
    let stop = false;
    const parser = createParser({
      onEvent: (m: EventSourceMessage) => {
        if (stop) return;
        const e = { id: m.id, data: JSON.parse(m.data) };
        out.events.push(e);
        if (opts.until?.(e, out.events)) stop = true;
      },
      onComment: (c) => out.comments.push(c.trim()),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    while (!stop) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    if (stop) controller.abort();
    return out;
  } finally {
    clearTimeout(timer);
  }
}
