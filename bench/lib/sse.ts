import { performance } from "node:perf_hooks";
import { Agent, request, type Dispatcher } from "undici";
import { createParser } from "eventsource-parser";

/**
 * One undici connection pool per scenario: unlimited connections per origin, kept alive
 * between runs so that connection set-up does not count in the latencies. `idle` streams get
 * no body timeout.
 */
export function createDispatcher({ idle = false }: { idle?: boolean } = {}): Agent {
  return new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 60_000, bodyTimeout: idle ? 0 : 60_000, connect: { timeout: 10_000 } });
}

/** Closes a dispatcher, destroying it if requests are still pending after `graceMs`. */
export async function closeDispatcher(d: Agent, graceMs = 5000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), graceMs)));
  const res = await Promise.race([d.close().then(() => "closed" as const, () => "late" as const), late]);
  clearTimeout(timer);
  if (res === "late") await d.destroy().catch(() => {});
}

export interface SseRequest {
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: unknown;
  dispatcher: Dispatcher;
  signal: AbortSignal;
  /** Whole-request limit; none when omitted (held streams). */
  timeoutMs?: number;
}

export interface SseOutcome {
  status: number;
  /** Milliseconds from sending the request to the response headers. */
  tHeaders: number | null;
  error?: string;
}

/**
 * Sends a request and feeds the data of each Server-Sent Event to `onData` with the
 * milliseconds elapsed since the request was sent; `onData` returns true to stop reading.
 * Never throws: a failure is reported in `error`.
 */
export async function readSseTimed(url: string, req: SseRequest, onData: (data: string, ms: number) => boolean | void): Promise<SseOutcome> {
  // An explicit timer rather than AbortSignal.timeout(), which is held weakly and may be
  // collected (and never fire) while the request is pending.
  const controller = new AbortController();
  const onAbort = () => controller.abort(req.signal.reason);
  if (req.signal.aborted) controller.abort(req.signal.reason);
  else req.signal.addEventListener("abort", onAbort, { once: true });
  const timer = req.timeoutMs ? setTimeout(() => controller.abort(new Error(`timed out after ${req.timeoutMs} ms`)), req.timeoutMs) : null;
  const signal = controller.signal;
  const t0 = performance.now();
  let status = 0;
  let tHeaders: number | null = null;
  try {
    const res = await request(url, {
      method: req.method ?? (req.body === undefined ? "GET" : "POST"),
      headers: { accept: "text/event-stream", ...(req.body === undefined ? {} : { "content-type": "application/json" }), ...req.headers },
      body: req.body === undefined ? undefined : JSON.stringify(req.body),
      dispatcher: req.dispatcher,
      signal,
    });
    status = res.statusCode;
    tHeaders = performance.now() - t0;
    if (status !== 200 || !String(res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
      const text = await res.body.text();
      return { status, tHeaders, error: `HTTP ${status}: ${text.slice(0, 200)}` };
    }
    let stop = false;
    const parser = createParser({
      onEvent: (m) => {
        if (!stop && onData(m.data, performance.now() - t0)) stop = true;
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
      if (stop) break;
    }
    return { status, tHeaders };
  } catch (err) {
    const e = err as Error & { cause?: Error };
    return { status, tHeaders, error: `${e.name}: ${e.message}${e.cause ? ` (${e.cause.message})` : ""}` };
  } finally {
    if (timer) clearTimeout(timer);
    req.signal.removeEventListener("abort", onAbort);
  }
}

const TERMINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);

/** Timings of one streamed run through the gateway, in ms since the request was sent. */
export interface RunTiming {
  ok: boolean;
  error?: string;
  runStarted: number | null;
  firstText: number | null;
  end: number | null;
  terminal: string | null;
  textChunks: number;
  runId?: string;
  taskId?: string;
}

/**
 * `POST /api/run` with `stream: true`, read to its terminal event. ok = a `run_completed` after
 * every event once, in order (seq 1, 2, 3…), whose text chunks make `expectText` when given.
 */
export async function timedRun(
  gatewayUrl: string,
  headers: Record<string, string>,
  query: string,
  opts: { dispatcher: Dispatcher; signal: AbortSignal; timeoutMs?: number; expectText?: string },
): Promise<RunTiming> {
  const t: RunTiming = { ok: false, runStarted: null, firstText: null, end: null, terminal: null, textChunks: 0 };
  let seq = 0;
  let text = "";
  const out = await readSseTimed(`${gatewayUrl}/api/run`, { ...opts, headers, body: { query, stream: true }, timeoutMs: opts.timeoutMs ?? 60_000 }, (data, ms) => {
    const e = JSON.parse(data) as { seq: number; type: string; run_id?: string; task_id?: string; content?: string; error?: { code: string } };
    if (e.seq !== seq + 1) t.error ??= `event seq ${e.seq} after ${seq}`;
    seq = e.seq;
    if (e.type === "run_started") {
      t.runStarted ??= ms;
      t.runId = e.run_id;
      t.taskId = e.task_id;
    } else if (e.type === "text_chunk") {
      t.firstText ??= ms;
      t.textChunks++;
      text += e.content ?? "";
    } else if (TERMINAL.has(e.type)) {
      t.terminal = e.type;
      t.end = ms;
      if (e.type !== "run_completed") t.error = `${e.type}${e.error ? ` ${e.error.code}` : ""}`;
    }
    return false;
  });
  if (out.error) t.error = out.error;
  else if (!t.terminal) t.error = "stream ended without a terminal event";
  else if (opts.expectText !== undefined && t.terminal === "run_completed" && text !== opts.expectText) t.error ??= "streamed text differs from the model's answer";
  t.ok = !t.error && t.terminal === "run_completed";
  return t;
}

/** Timings of one streamed completion from the scripted model itself. */
export interface ModelTiming {
  ok: boolean;
  error?: string;
  firstText: number | null;
  end: number | null;
  chunks: number;
}

/** The baseline: the scripted model's own `POST /v1/chat/completions` stream, with the same directives. */
export async function timedModelStream(modelUrl: string, query: string, opts: { dispatcher: Dispatcher; signal: AbortSignal; timeoutMs?: number }): Promise<ModelTiming> {
  const t: ModelTiming = { ok: false, firstText: null, end: null, chunks: 0 };
  const body = { model: "scripted", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: query }] };
  const out = await readSseTimed(`${modelUrl}/v1/chat/completions`, { ...opts, body, timeoutMs: opts.timeoutMs ?? 60_000 }, (data, ms) => {
    if (data === "[DONE]") {
      t.end = ms;
      return true;
    }
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string } }[] };
    if (chunk.choices?.[0]?.delta?.content) {
      t.firstText ??= ms;
      t.chunks++;
    }
    return false;
  });
  if (out.error) t.error = out.error;
  else if (t.end === null) t.error = "stream ended without [DONE]";
  t.ok = !t.error;
  return t;
}

export interface HeldStream {
  /** Resolves at the first event (ok) or when the stream failed before one. */
  ready: Promise<{ ok: boolean; ms?: number; data?: any; error?: string }>;
  /** Resolves when the stream ends (abort `signal` to end it). */
  ended: Promise<SseOutcome>;
}

/** Opens a stream and keeps reading it (discarding events) until it ends or `signal` aborts. */
export function holdStream(url: string, req: SseRequest): HeldStream {
  let resolveReady!: (v: { ok: boolean; ms?: number; data?: any; error?: string }) => void;
  const ready = new Promise<{ ok: boolean; ms?: number; data?: any; error?: string }>((r) => (resolveReady = r));
  let first = true;
  const ended = readSseTimed(url, req, (data, ms) => {
    if (first) {
      first = false;
      let parsed: unknown = data;
      try {
        parsed = JSON.parse(data);
      } catch {
        /* keep the text */
      }
      resolveReady({ ok: true, ms, data: parsed });
    }
    return false;
  }).then((out) => {
    if (first) resolveReady({ ok: false, error: out.error ?? `stream ended before its first event (HTTP ${out.status})` });
    return out;
  });
  return { ready, ended };
}
