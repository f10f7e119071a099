import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { build } from "esbuild";
import { bundleWidget, WIDGET_SOURCE_DIR } from "./widget-bundle";

// The widget's browser modules, bundled as the gateway serves them, and its SSE reader run on
// Node's own web streams (the same TextDecoderStream and ReadableStream API as a browser's).

describe("bundleWidget", () => {
  it("bundles the widget's modules, the SSE parser and the styles into one self-contained script", async () => {
    const { body, etag } = await bundleWidget();
    const script = body.toString("utf8");
    expect(script.startsWith("/* agentrun chat widget (MIT).")).toBe(true);
    // One IIFE: no module syntax left for a classic <script> tag to choke on.
    expect(script).toMatch(/^\/\*[^]*?\*\/\n"use strict";\(\(\)=>\{/);
    expect(script).not.toMatch(/(^|[;\n])\s*(import|export)\s[\w{*]/);
    expect(script).not.toContain("require(");
    expect(script).toContain("data-widget-key");
    expect(script).toContain(".bubble{position:fixed;");
    expect(script).toContain("TextDecoderStream");
    expect(etag).toMatch(/^"[\w-]{27}"$/);
    // The same sources give the same bytes, so every gateway process serves the same ETag.
    expect((await bundleWidget()).etag).toBe(etag);
  });

  it("changes the ETag when a source changes", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "widget-src-"));
    try {
      cpSync(WIDGET_SOURCE_DIR, dir, { recursive: true });
      writeFileSync(path.join(dir, "widget.css"), readFileSync(path.join(dir, "widget.css"), "utf8") + "\n.extra{color:red}");
      const changed = await bundleWidget(dir);
      expect(changed.body.toString("utf8")).toContain(".extra{color:red}");
      expect(changed.etag).not.toBe((await bundleWidget()).etag);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

interface EventsModule {
  readEvents(res: Response, onEvent: (ev: unknown) => boolean): Promise<boolean>;
  retryAfterMs(res: Response): number;
}

/** public/widget/events.js as a CommonJS module for this test. */
async function loadEventsModule(): Promise<EventsModule> {
  const out = await build({ entryPoints: [path.join(WIDGET_SOURCE_DIR, "events.js")], bundle: true, write: false, format: "cjs", platform: "neutral", logLevel: "silent" });
  const module = { exports: {} as EventsModule };
  new Function("module", "exports", out.outputFiles[0]!.text)(module, module.exports);
  return module.exports;
}

/**
 * A streamed response body of these byte chunks, which then ends, fails (a lost connection) or
 * stays open like a live run's stream; `cancelled` resolves when the reader gives up on it.
 */
function streamOf(chunks: (string | Uint8Array)[], then: "end" | "error" | "stay open" = "end", headers: Record<string, string> = {}) {
  const state = { cancelled: false };
  let pulled = 0;
  let onCancel = () => {};
  const cancelled = new Promise<void>((resolve) => (onCancel = resolve));
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks[pulled++];
      if (next === undefined) {
        if (then === "stay open") return new Promise<void>(() => {});
        return then === "error" ? controller.error(new TypeError("network error")) : controller.close();
      }
      controller.enqueue(typeof next === "string" ? new TextEncoder().encode(next) : next);
    },
    cancel() {
      state.cancelled = true;
      onCancel();
    },
  });
  return { response: new Response(body, { headers: { "content-type": "text/event-stream", ...headers } }), state, cancelled };
}

/** Waits for a body's cancel, which travels up the decoder and parser streams on later ticks. */
async function cancelledInTime(cancelled: Promise<void>): Promise<void> {
  const gaveUp = new Promise<void>((_, reject) => setTimeout(() => reject(new Error("the body was never cancelled")), 2000).unref());
  await Promise.race([cancelled, gaveUp]);
}

describe("the widget's SSE reader", () => {
  let events: EventsModule;
  beforeAll(async () => {
    events = await loadEventsModule();
  });

  it("hands over each event's JSON in order: split anywhere, CRLF, comments and ids; data that is not JSON skipped", async () => {
    const euro = new TextEncoder().encode('data: {"seq":2,"content":"5 €"}\n\n');
    const cut = euro.indexOf(0xe2) + 1; // inside the euro sign's three bytes
    const { response } = streamOf([
      ": ping\n\nid: 1\nevent: run_started\nda",
      'ta: {"seq":1,"type":"run_started"}\r\n\r\n',
      euro.slice(0, cut),
      euro.slice(cut),
      "data: not json\n\n",
      'data: {"seq":3,\ndata: "type":"text_chunk"}\n\n',
    ]);
    const seen: unknown[] = [];
    expect(await events.readEvents(response, (ev) => (seen.push(ev), false))).toBe(false);
    expect(seen).toEqual([{ seq: 1, type: "run_started" }, { seq: 2, content: "5 €" }, { seq: 3, type: "text_chunk" }]);
  });

  it("stops at the event it is told to stop at and cancels the rest of the body", async () => {
    const { response, state, cancelled } = streamOf(['data: {"seq":1}\n\ndata: {"seq":2}\n\n', 'data: {"seq":3}\n\n'], "stay open");
    const seen: number[] = [];
    expect(await events.readEvents(response, (ev) => (seen.push((ev as { seq: number }).seq), (ev as { seq: number }).seq === 2))).toBe(true);
    expect(seen).toEqual([1, 2]);
    await cancelledInTime(cancelled);
    expect(state.cancelled).toBe(true);
  });

  it("rejects when the connection is lost mid-stream, after the events that came whole", async () => {
    const { response } = streamOf(['data: {"seq":1}\n\ndata: {"se'], "error");
    const seen: unknown[] = [];
    await expect(events.readEvents(response, (ev) => (seen.push(ev), false))).rejects.toThrow("network error");
    expect(seen).toEqual([{ seq: 1 }]);
  });

  it("gives up on a stream silent for three ping intervals (X-Heartbeat-Interval-Ms): rejects and cancels the body", async () => {
    const { response, state, cancelled } = streamOf(['data: {"seq":1}\n\n'], "stay open", { "X-Heartbeat-Interval-Ms": "100" });
    const seen: unknown[] = [];
    const started = Date.now();
    await expect(events.readEvents(response, (ev) => (seen.push(ev), false))).rejects.toThrow("the event stream went silent");
    const waited = Date.now() - started;
    expect(seen).toEqual([{ seq: 1 }]);
    expect(waited).toBeGreaterThanOrEqual(295);
    expect(waited).toBeLessThan(5000);
    await cancelledInTime(cancelled);
    expect(state.cancelled).toBe(true);
  });

  it("keeps reading a stream whose pings come in time, however long it brings no event", async () => {
    // Pings every 60 ms for 0.9 s (nine intervals of 100 ms), then the last event.
    const frames = [...Array.from({ length: 15 }, () => ": ping\n\n"), 'data: {"seq":2}\n\n'];
    let timer: NodeJS.Timeout | undefined;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = frames.shift();
        if (next === undefined) return controller.close();
        return new Promise<void>((resolve) => {
          timer = setTimeout(() => (controller.enqueue(new TextEncoder().encode(next)), resolve()), 60);
        });
      },
      cancel: () => clearTimeout(timer),
    });
    const response = new Response(body, { headers: { "content-type": "text/event-stream", "X-Heartbeat-Interval-Ms": "100" } });
    const seen: unknown[] = [];
    expect(await events.readEvents(response, (ev) => (seen.push(ev), false))).toBe(false);
    expect(seen).toEqual([{ seq: 2 }]);
  });

  it("reads Retry-After in seconds or as an HTTP date, and 0 without one or for a date past", () => {
    const after = (v?: string) => events.retryAfterMs(new Response(null, { status: 503, headers: v === undefined ? {} : { "Retry-After": v } }));
    expect(after("3")).toBe(3000);
    expect(after()).toBe(0);
    expect(after(new Date(Date.now() - 60_000).toUTCString())).toBe(0);
    const inAMinute = after(new Date(Date.now() + 60_000).toUTCString());
    expect(inAMinute).toBeGreaterThan(58_000);
    expect(inAMinute).toBeLessThanOrEqual(60_000);
  });
});
