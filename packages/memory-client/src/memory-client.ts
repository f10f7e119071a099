import { z } from "zod";
import {
  internalMemoryContextSchema,
  internalMemorySearchSchema,
  memoryEntrySchema,
  memoryListQuerySchema,
  memoryListSchema,
  type MemoryEntryView,
  type MemoryScope,
  type internalMemoryCreateSchema,
} from "@agentrun/contracts";
import { AppError, isConnectionLostError, type ErrorCode } from "@agentrun/errors";

/** Body of `POST /internal/memories`; `category` is `general` for a new entry when absent, and a duplicate keeps its own. */
export type CreateMemoryRequest = z.input<typeof internalMemoryCreateSchema>;
export interface CreateMemoryResponse {
  memory: MemoryEntryView;
  /** False when the user already had this exact content and the existing entry is returned. */
  created: boolean;
}
/** Query of `GET /internal/memories`: every user of the agent when `user_id` is absent. */
export interface ListMemoriesRequest extends MemoryScope {
  user_id?: string;
  /** 1..100. @defaultValue 20 */
  limit?: number;
  /** Only entries older than this one (a page back), also once it is deleted. */
  before?: string;
}
export type SearchMemoriesRequest = z.input<typeof internalMemorySearchSchema>;
export type MemoryContextRequest = z.input<typeof internalMemoryContextSchema>;
/** A search hit; a higher score is more relevant. */
export type ScoredMemoryEntryView = MemoryEntryView & { score: number };

export interface MemoryClientOptions {
  /** The memory service's base URL, e.g. `http://127.0.0.1:3002`. */
  baseUrl: string;
  /** The shared INTERNAL_TOKEN. */
  token: string;
  /**
   * Upper bound for one call, connecting and reading the body included.
   * @defaultValue 2000
   */
  timeoutMs?: number;
  /**
   * The fetch implementation.
   * @defaultValue the global `fetch`
   */
  fetch?: typeof fetch;
}

export interface CallOptions {
  /** Aborts the call; the rejection is then this signal's reason. */
  signal?: AbortSignal;
  /** Sent as `X-Request-Id`, so that the memory service's log line names the request (or run) it served. */
  requestId?: string;
}

/**
 * The memory service's internal API. Every method rejects with an {@link AppError}: the
 * service's own error about the request (`invalid_request`, `memory_not_found` or `forbidden`, with
 * its status, message and details), or `unavailable` when the service cannot be reached, times
 * out, answers 5xx, answers another error (e.g. 401 for a wrong token) or answers something that
 * is not the contract's shape.
 */
export interface MemoryClient {
  create(input: CreateMemoryRequest, opts?: CallOptions): Promise<CreateMemoryResponse>;
  list(query: ListMemoriesRequest, opts?: CallOptions): Promise<{ memories: MemoryEntryView[]; has_more: boolean }>;
  get(scope: MemoryScope, id: string, opts?: CallOptions): Promise<{ memory: MemoryEntryView }>;
  remove(scope: MemoryScope, id: string, opts?: CallOptions): Promise<void>;
  search(input: SearchMemoriesRequest, opts?: CallOptions): Promise<{ memories: ScoredMemoryEntryView[] }>;
  context(input: MemoryContextRequest, opts?: CallOptions): Promise<{ memories: MemoryEntryView[] }>;
}

/**
 * The success bodies of the internal API, one per method. Objects drop fields the contract does
 * not name, so nothing unexpected reaches the gateway's answers or a run's prompt.
 */
const RESPONSE_SCHEMAS = {
  create: z.object({ memory: memoryEntrySchema, created: z.boolean() }),
  get: z.object({ memory: memoryEntrySchema }),
} satisfies Record<string, z.ZodType>;

/**
 * The answers that list entries, with no more of them than the request asked for (`max`, the
 * request's own limit or its default): a service that answers more is not keeping the contract.
 */
const listAnswer = (max: number) => memoryListSchema.extend({ memories: memoryListSchema.shape.memories.max(max) });
const searchAnswer = (max: number) => z.object({ memories: z.array(memoryEntrySchema.extend({ score: z.number() })).max(max) });
const contextAnswer = (max: number) => z.object({ memories: z.array(memoryEntrySchema).max(max) });

/** The internal API's default limits, as its request schemas give them. */
const DEFAULT_LIMITS = {
  list: memoryListQuerySchema.shape.limit.parse(undefined),
  search: internalMemorySearchSchema.shape.limit.parse(undefined),
  context: internalMemoryContextSchema.shape.max_count.parse(undefined),
};

/** What a call must answer: a 2xx JSON body of this shape, or a 204 without a body. */
type Expected = z.ZodType | "no_content";

interface Call<E extends Expected> {
  method: "GET" | "POST" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  answers: E;
  /** The call changes the store: one that timed out may still take effect. */
  writes?: boolean;
}

type Answer<E extends Expected> = E extends z.ZodType ? z.output<E> : void;

const unavailable = (cause: unknown): AppError => new AppError("unavailable", { message: "memory service unavailable", cause });

/**
 * A change the service did not confirm: it was sent, and may be applied once the service catches
 * up (no answer in time), or was applied before its answer was lost (the connection broke).
 */
const unconfirmed = (timeoutMs: number | null, cause: unknown): AppError =>
  new AppError("unavailable", {
    message: timeoutMs !== null ? `The memory service did not answer within ${timeoutMs} ms; the change may still take effect.` : "The connection to the memory service was lost before its answer; the change may have taken effect.",
    cause,
  });

/**
 * The service's errors that are about the caller's request and so are rethrown as they are.
 * Any other 4xx (`unauthorized` from a wrong INTERNAL_TOKEN, `not_found` for a route the service
 * lacks, …) is a deployment fault: passed through, it would reach a public caller as if it were
 * theirs, so it becomes `unavailable` like a 5xx.
 */
const CALLER_ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(["invalid_request", "forbidden", "memory_not_found"]);

const isCallerErrorCode = (code: unknown): code is ErrorCode => typeof code === "string" && CALLER_ERROR_CODES.has(code as ErrorCode);

/** The service's error, when `body` is the contract's `{error:{code,message,details?}}` with a caller error code. */
function contractError(status: number, body: unknown): AppError | undefined {
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (!error || !isCallerErrorCode(error.code) || typeof error.message !== "string") return undefined;
  return new AppError(error.code, { status, message: error.message, details: error.details });
}

/**
 * Most bytes of an answer read: the largest the contract allows (100 entries of 4,000 characters,
 * each escaped to at most 6 bytes, with their ids and user ids) fits well within it. A faulty
 * service's endless or huge body is cut here, not held in a worker's or gateway's memory.
 */
export const MEMORY_ANSWER_MAX_BYTES = 4 * 1024 * 1024;

/** The text of `res`'s body, or a rejection once it passes `maxBytes`. */
async function boundedText(res: Response, maxBytes: number): Promise<string> {
  const tooLarge = () => new Error(`the memory service's answer is larger than ${maxBytes} bytes`);
  if (Number(res.headers.get("content-length") ?? 0) > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body) return "";
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  let text = "";
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    bytes += value.byteLength;
    if (bytes > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
}

/** Runs `work`, rejecting with the signal's reason as soon as `signal` aborts. */
async function raceAbort<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  signal.throwIfAborted();
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([work(), aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * The body of a 2xx answer if it is what the call expects: 204 and nothing for a method that
 * answers no body, JSON of the method's shape for the others. Anything else is `unavailable`:
 * a body the caller cannot use is as good as no answer.
 */
function successBody<E extends Expected>(answers: E, status: number, text: string, request: string): Answer<E> {
  const wrongShape = (cause?: unknown) => unavailable(new Error(`memory service answered ${request} with HTTP ${status} and a body not in the contract's shape`, { cause }));
  if (answers === "no_content") {
    if (status === 204) return undefined as Answer<E>;
    throw wrongShape();
  }
  if (status === 204) throw wrongShape();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw wrongShape(err);
  }
  const checked = (answers as z.ZodType).safeParse(parsed);
  if (!checked.success) throw wrongShape(checked.error);
  return checked.data as Answer<E>;
}

/** Creates a client; it holds no connection of its own, so there is nothing to close. */
export function createMemoryClient({ baseUrl, token, timeoutMs = 2000, fetch: fetchImpl = globalThis.fetch }: MemoryClientOptions): MemoryClient {
  const base = baseUrl.replace(/\/+$/, "");

  async function call<E extends Expected>({ method, path, query, body, answers, writes }: Call<E>, opts: CallOptions = {}): Promise<Answer<E>> {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (opts.requestId) headers["x-request-id"] = opts.requestId;

    let status: number;
    let text: string;
    try {
      // A redirect is not part of the contract; following one could send the token elsewhere.
      const init: RequestInit = { method, headers, signal, redirect: "error" };
      if (body !== undefined) init.body = JSON.stringify(body);
      // The signal covers reading the body too; the race also bounds a fetch that ignores it.
      ({ status, text } = await raceAbort(signal, async () => {
        const res = await fetchImpl(url, init);
        return { status: res.status, text: await boundedText(res, MEMORY_ANSWER_MAX_BYTES) };
      }));
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (!writes) throw unavailable(err);
      if (timeout.aborted) throw unconfirmed(timeoutMs, err);
      throw isConnectionLostError(err) ? unconfirmed(null, err) : unavailable(err);
    }

    if (status >= 200 && status < 300) return successBody(answers, status, text, `${method} ${path}`);
    let parsed: unknown;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch (err) {
      throw unavailable(err);
    }
    if (status >= 400 && status < 500) {
      const appErr = contractError(status, parsed);
      if (appErr) throw appErr;
    }
    // The status stays readable on the cause: a 401 or 403 is a misconfiguration (a wrong
    // INTERNAL_TOKEN), not an outage, to whoever logs it.
    throw unavailable(Object.assign(new Error(`memory service answered ${method} ${path} with HTTP ${status}`), { status }));
  }

  const scopeQuery = (scope: MemoryScope) => ({ org_id: scope.org_id, agent_id: scope.agent_id });
  const entryPath = (id: string) => `/internal/memories/${encodeURIComponent(id)}`;

  return {
    create: (input, opts) => call({ method: "POST", path: "/internal/memories", body: input, answers: RESPONSE_SCHEMAS.create, writes: true }, opts),
    list: (query, opts) =>
      call(
        {
          method: "GET",
          path: "/internal/memories",
          query: { ...scopeQuery(query), user_id: query.user_id, limit: query.limit, before: query.before },
          answers: listAnswer(query.limit ?? DEFAULT_LIMITS.list),
        },
        opts,
      ),
    get: (scope, id, opts) => call({ method: "GET", path: entryPath(id), query: scopeQuery(scope), answers: RESPONSE_SCHEMAS.get }, opts),
    remove: (scope, id, opts) => call({ method: "DELETE", path: entryPath(id), query: scopeQuery(scope), answers: "no_content", writes: true }, opts),
    search: (input, opts) => call({ method: "POST", path: "/internal/memories/search", body: input, answers: searchAnswer(input.limit ?? DEFAULT_LIMITS.search) }, opts),
    context: (input, opts) => call({ method: "POST", path: "/internal/memories/context", body: input, answers: contextAnswer(input.max_count ?? DEFAULT_LIMITS.context) }, opts),
  };
}
