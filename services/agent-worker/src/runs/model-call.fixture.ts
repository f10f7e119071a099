import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import type { ModelCallOptions, ModelUsage } from "./model-call";
import { callModelRetryingBreaks } from "./model-call-retry";
import { createModelFetch } from "./model-fetch";

// A provider's stream as raw chunks: the SDK reads them over HTTP as from any hosted model.
export const chunk = (delta: object, usage?: object) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: usage ? [] : [{ index: 0, delta }], ...(usage ? { usage } : {}) })}\n\n`;

/** The first delta of a tool call at `index`, with the name and arguments whole. */
export const toolCall = (index: number, id: string | undefined, name = "calc") =>
  chunk({ tool_calls: [{ index, ...(id === undefined ? {} : { id }), type: "function", function: { name, arguments: "{}" } }] });

/** What the provider of {@link scriptedProvider} answers; reset before each test. */
export interface ProviderScript {
  /** The parts of the stream, after which it sends `[DONE]`. */
  script: string[];
  /** Pause before each part of the script, as a model that streams slowly. */
  gapMs: number;
  /** Answers to give before the script, one per request (e.g. a 503 that asks for a retry). */
  refusals: { status: number; headers: Record<string, string>; body?: string }[];
  /** The JSON bodies of the requests received. */
  bodies: Record<string, unknown>[];
  /** Pause before the response headers, as a model that has not accepted the request yet. */
  headersAfterMs: number;
  /** Requests received. */
  requests: number;
  /** Reset the connection after the script instead of ending the stream with `[DONE]`. */
  resetAfterScript: boolean;
  /** Requests (the first ones) answered 200 whose connection is then reset before any event. */
  breakBeforeAnswer: number;
  /**
   * After the script, and `[DONE]` unless `done` is false, hold the response open instead of
   * ending it, writing a keep-alive comment every `keepAliveMs` if that is set.
   */
  holdOpen: { done: boolean; keepAliveMs?: number } | null;
  /** The status of a success answered without a body (204), instead of the stream. */
  emptySuccess: number | null;
  /** A Content-Encoding the stream claims (its parts are sent as they are all the same). */
  contentEncoding: string | null;
  /** The signals the SDK handed to `fetch`, one per request. */
  fetchSignals: AbortSignal[];
  /** Called as each part of the script has been written (its index), before the next part's pause. */
  afterPart: ((index: number) => void) | null;
}

/**
 * A test file's provider: an HTTP server started before its tests (`beforeAll`) that answers as
 * `provider` says, which is reset before each test; and `call`, which runs callModel against it
 * (`failure`: how the call failed, and after how long).
 */
export function scriptedProvider() {
  const fresh = (): ProviderScript => ({ script: [], gapMs: 0, refusals: [], headersAfterMs: 0, requests: 0, bodies: [], resetAfterScript: false, breakBeforeAnswer: 0, holdOpen: null, emptySuccess: null, contentEncoding: null, fetchSignals: [], afterPart: null });
  const provider: ProviderScript = fresh();
  /** `modelFetch`, recording the signal of each request in `provider.fetchSignals`. */
  const recording = (modelFetch: typeof fetch): typeof fetch => (input, init) => {
    if (init?.signal) provider.fetchSignals.push(init.signal);
    return modelFetch(input, init);
  };
  let server: Server;
  let client: OpenAI;

  beforeAll(async () => {
    server = createServer(async (req, res) => {
      provider.requests++;
      let text = "";
      for await (const part of req) text += part;
      provider.bodies.push(JSON.parse(text || "{}") as Record<string, unknown>);
      const refusal = provider.refusals.shift();
      if (refusal) {
        res.writeHead(refusal.status, { "content-type": "application/json", ...refusal.headers });
        res.end(refusal.body ?? JSON.stringify({ error: { message: "busy", type: "server_error" } }));
        return;
      }
      if (provider.headersAfterMs) await new Promise((r) => setTimeout(r, provider.headersAfterMs));
      if (res.destroyed) return;
      if (provider.emptySuccess !== null) return void res.writeHead(provider.emptySuccess).end();
      res.writeHead(200, { "content-type": "text/event-stream", ...(provider.contentEncoding && { "content-encoding": provider.contentEncoding }) });
      // The headers leave at once, before the first chunk, as a provider's do.
      res.flushHeaders();
      if (provider.breakBeforeAnswer > 0) {
        provider.breakBeforeAnswer--;
        await new Promise((r) => setTimeout(r, 50));
        res.socket?.resetAndDestroy();
        return;
      }
      for (const [index, part] of provider.script.entries()) {
        if (provider.gapMs) await new Promise((r) => setTimeout(r, provider.gapMs));
        if (res.destroyed) return;
        res.write(part);
        provider.afterPart?.(index);
      }
      if (provider.resetAfterScript) {
        // Once what was written has left, as a connection that breaks after them.
        await new Promise((r) => setTimeout(r, 50));
        res.socket?.resetAndDestroy();
        return;
      }
      const hold = provider.holdOpen;
      if (!hold) return void res.end("data: [DONE]\n\n");
      if (hold.done) res.write("data: [DONE]\n\n");
      const keepAlive = hold.keepAliveMs ? setInterval(() => res.write(": keep-alive\n\n"), hold.keepAliveMs) : undefined;
      res.on("close", () => clearInterval(keepAlive));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: "none", maxRetries: 0, fetch: recording(createModelFetch()) });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  beforeEach(() => {
    Object.assign(provider, fresh());
  });

  async function call(opts: Partial<ModelCallOptions> = {}) {
    const texts: string[] = [];
    const usages: ModelUsage[] = [];
    // As the worker calls the model (see executeRun).
    const turn = await callModelRetryingBreaks({
      client,
      model: "m",
      messages: [{ role: "user", content: "12345678" }],
      tools: [],
      signal: new AbortController().signal,
      timeoutMs: 5000,
      idleTimeoutMs: 5000,
      maxRetries: 0,
      onText: (t) => texts.push(t),
      onUsage: (u) => usages.push(u),
      ...opts,
    });
    return { turn, texts, usages };
  }

  async function failure(opts: Partial<ModelCallOptions>): Promise<{ err: unknown; ms: number }> {
    const t0 = Date.now();
    const err = await call(opts).then(
      () => null,
      (e: unknown) => e,
    );
    return { err, ms: Date.now() - t0 };
  }

  return { provider, call, failure };
}
