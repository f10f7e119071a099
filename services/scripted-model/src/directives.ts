/**
 * Parsing of the bracketed directives that script the model's behaviour, and the chunking of an
 * answer into stream pieces. Pure functions only, so that they can be unit-tested directly.
 */

/** One `[call:NAME {json}]` directive. */
export interface CallDirective {
  name: string;
  /**
   * The arguments as sent to the client: the JSON object re-serialised, `{}` when omitted, or the
   * raw text verbatim when it is brace-balanced but not valid JSON (to test malformed tool arguments).
   */
  arguments: string;
}

/** A directive that makes the answer text itself, in the order written. */
export type TextDirective = "echo-system" | "history";

/** Everything the directives of one message ask for. Repeated scalar directives: the last one wins. */
export interface Directives {
  calls: CallDirective[];
  text: TextDirective[];
  sleepMs?: number;
  chunks?: number;
  errorStatus?: number;
  usage?: number;
  malformed: boolean;
  hang: boolean;
  /** `[no-usage]`: no usage in the answer, like a provider that ignores `include_usage`. */
  noUsage?: true;
  /** `[preface]`: the tool-call answer streams the message's text before its tool calls. */
  preface?: true;
  /**
   * `[stream-error]`: a streamed request is answered 200 with one error object as its only event,
   * as a provider reports a failure after its stream began (status and code from `[error:STATUS]`,
   * else 500); a request without streaming gets that error status.
   */
  streamError?: true;
  /**
   * `[cut]`: a streamed answer ends after its first chunk, cleanly (no finishing chunk, no usage,
   * no `[DONE]`), as a connection a proxy closed mid-answer; without streaming, the whole answer.
   */
  cut?: true;
  /** `[echo-key]`: error messages repeat the request's Authorization header, as some providers and proxies do. */
  echoKey?: true;
  /** `[finish:length]`, `[finish:content_filter]`: the answer's `finish_reason` (text or tool calls), as a provider that cut it reports (default `stop`, or `tool_calls`). */
  finish?: "length" | "content_filter";
}

/** The result of {@link parseDirectives}. */
export interface ParsedMessage {
  directives: Directives;
  /** The message with every directive removed and surrounding whitespace trimmed. */
  rest: string;
}

/** How many pieces an answer streams in when no `[chunks:N]` is given. */
export const DEFAULT_CHUNKS = 4;

const FLAG = /^\[(echo-system|history|malformed|hang|no-usage|preface|stream-error|echo-key|cut)\]/;
const NUMERIC = /^\[(sleep|chunks|error|usage):(\d{1,9})\]/;
const CALL_HEAD = /^\[call:([A-Za-z0-9_.-]+)\s*/;
const FINISH = /^\[finish:(length|content_filter)\]/;

/**
 * Extracts the directives from a user message. Bracketed text that is not a well-formed directive
 * (unknown name, `[error:200]`, unbalanced call arguments, ...) is left in {@link ParsedMessage.rest}.
 */
export function parseDirectives(message: string): ParsedMessage {
  const directives: Directives = { calls: [], text: [], malformed: false, hang: false };
  const scan: ScanBudget = { left: 2 * message.length + MAX_CALL_ARGUMENTS_CHARS };
  // The text between directives, as slices of the message (a string grown a character at a
  // time is a chain of millions of pieces for a long message).
  const rest: string[] = [];
  let from = 0;
  let i = message.indexOf("[");
  while (i >= 0) {
    const consumed = matchDirective(message.slice(i), directives, scan);
    if (consumed > 0) {
      rest.push(message.slice(from, i));
      from = i + consumed;
    }
    i = message.indexOf("[", i + Math.max(consumed, 1));
  }
  rest.push(message.slice(from));
  return { directives, rest: rest.join("").trim() };
}

/** Applies the directive at the start of `s` to `out`; returns its length, or 0 if there is none. */
function matchDirective(s: string, out: Directives, scan: ScanBudget): number {
  const flag = FLAG.exec(s);
  if (flag) {
    const name = flag[1];
    if (name === "echo-system" || name === "history") out.text.push(name);
    else if (name === "malformed") out.malformed = true;
    else if (name === "no-usage") out.noUsage = true;
    else if (name === "preface") out.preface = true;
    else if (name === "stream-error") out.streamError = true;
    else if (name === "echo-key") out.echoKey = true;
    else if (name === "cut") out.cut = true;
    else out.hang = true;
    return flag[0].length;
  }
  const finish = FINISH.exec(s);
  if (finish) {
    out.finish = finish[1] as "length" | "content_filter";
    return finish[0].length;
  }
  const numeric = NUMERIC.exec(s);
  if (numeric) {
    const value = Number(numeric[2]);
    switch (numeric[1]) {
      case "sleep":
        out.sleepMs = value;
        break;
      case "chunks":
        out.chunks = Math.max(1, value);
        break;
      case "error":
        // Only error statuses make sense; anything else stays plain text.
        if (value < 400 || value > 599) return 0;
        out.errorStatus = value;
        break;
      default:
        out.usage = value;
    }
    return numeric[0].length;
  }
  return matchCall(s, out, scan);
}

function matchCall(s: string, out: Directives, scan: ScanBudget): number {
  const head = CALL_HEAD.exec(s);
  if (!head?.[1]) return 0;
  const name = head[1];
  let pos = head[0].length;
  let args = "{}";
  if (s[pos] === "{") {
    const end = findObjectEnd(s, pos, scan);
    if (end < 0) return 0;
    const raw = s.slice(pos, end);
    args = reserialise(raw);
    pos = end;
    while (pos < s.length && /\s/.test(s[pos] ?? "")) pos += 1;
  }
  if (s[pos] !== "]") return 0;
  out.calls.push({ name, arguments: args });
  return pos + 1;
}

function reserialise(raw: string): string {
  try {
    return JSON.stringify(JSON.parse(raw));
  } catch {
    return raw;
  }
}

/** Longest `[call:NAME {…}]` arguments object: a longer one is not a directive (it stays text). */
export const MAX_CALL_ARGUMENTS_CHARS = 65_536;

/**
 * Characters the argument scans of one message may still visit, in all (parseDirectives gives
 * twice its length and one longest object). Many unclosed `[call:x {` would otherwise each be
 * scanned to the end of the message; once it is spent, further call directives stay text.
 */
interface ScanBudget {
  left: number;
}

/**
 * Index just past the `}` that closes the object opening at `start`, honouring JSON strings (so a
 * `]` or `}` inside a string value does not end it); -1 when it never closes.
 */
function findObjectEnd(s: string, start: number, scan: ScanBudget): number {
  let depth = 0;
  let inString = false;
  const stop = Math.min(s.length, start + MAX_CALL_ARGUMENTS_CHARS);
  for (let i = start; i < stop; i += 1) {
    if (--scan.left < 0) return -1;
    const c = s[i];
    if (inString) {
      if (c === "\\") i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
    } else if (c === "{" || c === "[") {
      depth += 1;
    } else if (c === "}" || c === "]") {
      depth -= 1;
      if (depth === 0) return c === "}" ? i + 1 : -1;
    }
  }
  return -1;
}

/**
 * Splits `text` into `n` roughly equal pieces (earlier pieces take the remainder), never splitting
 * a surrogate pair. A text shorter than `n` characters gives one piece per character; the empty
 * text gives a single empty piece, so that every answer has at least one chunk. Each piece is cut
 * as it is asked for: a stream of a long text in as many pieces holds one piece at a time.
 */
export function* chunkPieces(text: string, n: number = DEFAULT_CHUNKS): Generator<string> {
  const total = charCount(text);
  if (total === 0) {
    yield "";
    return;
  }
  const count = Math.min(Math.max(1, Math.floor(n)), total);
  const base = Math.floor(total / count);
  const extra = total % count;
  let start = 0;
  for (let k = 0; k < count; k += 1) {
    let end = start;
    for (let c = base + (k < extra ? 1 : 0); c > 0; c -= 1) end += codePointUnits(text, end);
    yield text.slice(start, end);
    start = end;
  }
}

/** {@link chunkPieces}, all of them. */
export function splitChunks(text: string, n: number = DEFAULT_CHUNKS): string[] {
  return Array.from(chunkPieces(text, n));
}

/** Length in characters (code points), the unit of the token estimate. */
export function charCount(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i += codePointUnits(text, i)) n += 1;
  return n;
}

/** UTF-16 units of the character at `i`: 2 for a surrogate pair, else 1 (a lone surrogate too, as `Array.from` counts it). */
const codePointUnits = (text: string, i: number) => (text.codePointAt(i)! > 0xffff ? 2 : 1);

/** The token estimate used for usage: one token per four characters, rounded up. */
export function estimateTokens(chars: number): number {
  return Math.ceil(chars / 4);
}
