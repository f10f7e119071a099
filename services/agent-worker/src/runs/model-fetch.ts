import { pipeline, type Readable } from "node:stream";
import { arrayBuffer as readArrayBuffer, json as readJson, text as readText } from "node:stream/consumers";
import { Agent, request, type Dispatcher } from "undici";
import { contentDecoder } from "@agentrun/json-body";

/** What the openai SDK reads of a response: a successful one keeps its body as a Node stream. */
type SdkResponse = Pick<Response, "ok" | "status" | "statusText" | "url" | "headers" | "text" | "json" | "arrayBuffer"> & { body: Readable | null };

/**
 * Most of an error answer's body that is read (an error's message, or a proxy's error page, is far
 * shorter): one endless or huge body must not hold a worker's memory for the call's whole time.
 */
export const ERROR_BODY_MAX_BYTES = 64 * 1024;

/**
 * The answer's body decoded from its Content-Encoding, or null when it has none (or one not
 * decoded by `contentDecoder`: its bytes are read as they are, and fail as a malformed answer).
 * The SDK's own `fetch` decodes them; a model server or a proxy may compress an answer though
 * the request did not ask for it. An error of the body (a reset) or of the decoding (bytes that
 * are not what the coding says) ends the decoded stream with that error.
 */
function decodedBody(body: Readable, coding: string | string[] | undefined): Readable | null {
  const decoder = typeof coding === "string" ? contentDecoder(coding) : undefined;
  if (!decoder) return null;
  return pipeline(body, decoder(), () => {});
}

/** The body's first `maxBytes` bytes as text; the rest is not read (the connection is closed). */
async function leadingText(body: Readable, maxBytes: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body) {
    const buf = part as Buffer;
    parts.push(buf.subarray(0, maxBytes - size));
    size += Math.min(buf.length, maxBytes - size);
    if (size >= maxBytes) {
      body.destroy();
      break;
    }
  }
  return new TextDecoder().decode(Buffer.concat(parts));
}

/**
 * An error answer's JSON as the SDK reads its message: from an `error` object. A body of another
 * shape (Mistral's `{"object":"error","message":{…}}`, FastAPI's `{"detail":…}`, older vLLM's
 * `{"object":"error","message":"…"}`) would leave the SDK's error without its text ("422 status
 * code (no body)"): it is given whole as the message of an `error` object, with its `type` and
 * `code`. Anything else is left as it is.
 */
function withErrorObject(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text;
  }
  if (!body || typeof body !== "object" || Array.isArray(body) || "error" in body) return text;
  const { type, code } = body as { type?: unknown; code?: unknown };
  return JSON.stringify({ error: { message: text, ...(typeof type === "string" && { type }), ...((typeof code === "string" || typeof code === "number") && { code }) } });
}

/**
 * A `fetch` for the openai SDK on `undici.request`. A successful answer's body is handed to the
 * SDK as the Node stream undici reads it into: the SDK iterates any body that is async-iterable
 * directly, so a streamed completion skips the WHATWG stream layers of the global `fetch`, which
 * cost more CPU than the rest of a run's model call. Answers with an error status are read up
 * front, their first {@link ERROR_BODY_MAX_BYTES} (the SDK reads only their text). A body in a
 * content coding is decoded (see {@link decodedBody}), as the global `fetch` does. Timeouts stay
 * the SDK's (request) and the caller's (idle stream): undici's own are off.
 */
export function createModelFetch(dispatcher: Dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 })): typeof fetch {
  const modelFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<SdkResponse | Response> => {
    // The SDK sends chat completions as a URL and a JSON string; anything else (a Request
    // object, a form or stream body) goes through the global fetch unchanged.
    if (typeof input !== "string" && !(input instanceof URL)) return fetch(input, init);
    if (init.body != null && typeof init.body !== "string" && !(init.body instanceof Uint8Array)) return fetch(input, init);
    const url = typeof input === "string" ? input : input.href;
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const signal = init.signal ?? undefined;
    const res = await request(url, { method: (init.method ?? "GET") as Dispatcher.HttpMethod, headers, body: init.body as string | Buffer | null | undefined, signal, dispatcher }).catch(
      (err: unknown) => {
        // The SDK tells an abort (its timeout, or the caller's signal) by an error named
        // AbortError; undici rejects with the signal's reason, which need not be one.
        throw signal?.aborted ? Object.assign(new Error("The request was aborted.", { cause: err }), { name: "AbortError" }) : err;
      },
    );
    const resHeaders = new Headers();
    for (const [key, value] of Object.entries(res.headers)) {
      if (Array.isArray(value)) for (const v of value) resHeaders.append(key, v);
      else if (value !== undefined) resHeaders.set(key, value);
    }
    const status = res.statusCode;
    const decoded = decodedBody(res.body, res.headers["content-encoding"]);
    // One literal per answer, not a spread of shared fields: V8 keeps no transitions from a
    // spread's copy, so every model call made new hidden classes.
    const answer = (body: Readable | null, read: Pick<SdkResponse, "text" | "json" | "arrayBuffer">): SdkResponse => ({
      ok: status >= 200 && status < 300,
      status,
      statusText: "",
      url,
      headers: resHeaders,
      body,
      text: read.text,
      json: read.json,
      arrayBuffer: read.arrayBuffer,
    });
    if (status < 200 || status >= 300 || status === 204) {
      // Read up front: the SDK only ever reads an error's text (or retries).
      const text = withErrorObject(await leadingText(decoded ?? res.body, ERROR_BODY_MAX_BYTES));
      return answer(null, { text: async () => text, json: async () => JSON.parse(text), arrayBuffer: async () => new TextEncoder().encode(text).buffer as ArrayBuffer });
    }
    if (decoded) {
      return answer(decoded, { text: () => readText(decoded), json: () => readJson(decoded), arrayBuffer: () => readArrayBuffer(decoded) });
    }
    const body = res.body;
    return answer(body, { text: () => body.text(), json: () => body.json(), arrayBuffer: () => body.arrayBuffer() });
  };
  return modelFetch as unknown as typeof fetch;
}
