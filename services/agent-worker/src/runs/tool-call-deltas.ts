import { storableText } from "@agentrun/db";
import { MAX_TOOL_ARGUMENTS_CHARS, MAX_TOOL_CALL_ID_CHARS, MAX_TOOL_NAME_CHARS } from "./model-limits";

/** A tool call of a model's answer. */
export interface ModelToolCall {
  id: string;
  name: string;
  /** Raw JSON text of the arguments as the model sent them. */
  arguments: string;
}

/** One streamed piece of a tool call, as OpenAI-compatible providers send it in `delta.tool_calls`. */
export interface ToolCallDelta {
  index?: number | null;
  id?: string | null;
  function?: { name?: string | null; arguments?: string | null } | null;
}

interface Entry {
  /** The provider's index, or null when it sent none. */
  index: number | null;
  call: ModelToolCall;
}

/**
 * Assembles the tool calls of one streamed answer from their deltas, as providers really send
 * them:
 * - OpenAI: the id and the whole name in the first delta of each `index`, then pieces of the
 *   arguments;
 * - providers that send the name again in later deltas (whole, or the name so far): the name is
 *   taken once, not repeated;
 * - providers that send no `index` (Gemini's OpenAI-compatible endpoint): a delta with an id not
 *   seen last starts a new call, one without continues the last;
 * - providers that send every call at one index: a new id at an index starts a new call there.
 */
export class ToolCallDeltas {
  private readonly entries: Entry[] = [];
  /** The latest call of each index. */
  private readonly byIndex = new Map<number, Entry>();

  /** The characters of every call's arguments so far, and the longest name and id of a call. */
  private argumentsChars = 0;
  private longestName = 0;
  private longestId = 0;

  constructor(private readonly maxCalls: number) {}

  /** The calls so far, in order (by index where the provider gave one, then as they came). */
  get calls(): ModelToolCall[] {
    return this.entries
      .map((e, arrival) => ({ e, arrival }))
      .sort((a, b) => (a.e.index ?? Infinity) - (b.e.index ?? Infinity) || a.arrival - b.arrival)
      .map(({ e }) => e.call);
  }

  /** Adds one delta. False when it would start a call beyond `maxCalls` (nothing is added then). */
  add(delta: ToolCallDelta): boolean {
    const id = typeof delta.id === "string" && delta.id ? delta.id : null;
    const index = Number.isInteger(delta.index) ? (delta.index as number) : null;
    let entry = this.entryFor(index, id);
    if (!entry) {
      if (this.entries.length === this.maxCalls) return false;
      entry = { index, call: { id: "", name: "", arguments: "" } };
      this.entries.push(entry);
      if (index !== null) this.byIndex.set(index, entry);
    }
    const call = entry.call;
    if (id) call.id = id;
    // A name that is not text is not taken (a call left without a name fails the answer); for arguments see argumentsText.
    const name = delta.function?.name;
    if (typeof name === "string" && name) call.name = mergedName(call.name, storableText(name));
    this.longestName = Math.max(this.longestName, call.name.length);
    this.longestId = Math.max(this.longestId, call.id.length);
    const args = argumentsText(delta.function?.arguments);
    if (args !== null) {
      call.arguments += args;
      this.argumentsChars += args.length;
    }
    return true;
  }

  /** What of the calls so far passes its limit (see model-limits), as a failure's message; null when nothing does. */
  overLimit(): string | null {
    if (this.argumentsChars > MAX_TOOL_ARGUMENTS_CHARS) return `The model sent tool call arguments of more than ${MAX_TOOL_ARGUMENTS_CHARS} characters in one answer.`;
    if (this.longestName > MAX_TOOL_NAME_CHARS) return `The model sent a tool call name of more than ${MAX_TOOL_NAME_CHARS} characters.`;
    if (this.longestId > MAX_TOOL_CALL_ID_CHARS) return `The model sent a tool call id of more than ${MAX_TOOL_CALL_ID_CHARS} characters.`;
    return null;
  }

  /** The call a delta continues, or null when it starts a new one. */
  private entryFor(index: number | null, id: string | null): Entry | null {
    const current = index === null ? (this.entries.at(-1) ?? null) : (this.byIndex.get(index) ?? null);
    if (!current) return null;
    // A different id starts a new call (at the same index, or after the last index-less one).
    if (id && current.call.id && id !== current.call.id) return null;
    return current;
  }
}

/**
 * A call's arguments as sent back to the model with the conversation: as it sent them when they
 * are a JSON object, else `{}`. Strict providers (vLLM, some proxies) refuse a conversation that
 * carries arguments that are not JSON; the call's result tells the model what was wrong with them,
 * and the run's events and messages keep them as they came.
 */
export function argumentsForModel(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return text;
  } catch {
    // not JSON
  }
  return "{}";
}

/**
 * A call's name after a delta that carries `next`: the name so far repeated with more replaces
 * it; the name so far again, or its beginning, leaves it; anything else is the next piece of a
 * name sent in pieces.
 */
function mergedName(sofar: string, next: string): string {
  if (next.startsWith(sofar)) return next;
  if (sofar.startsWith(next)) return sofar;
  return sofar + next;
}

/**
 * A delta's arguments as text: a string as it is; a JSON object (as llama.cpp's server and TGI
 * have sent them) as its JSON, so that the call runs with what the model asked for rather than
 * with none. Anything else is not taken.
 */
function argumentsText(args: unknown): string | null {
  if (typeof args === "string") return args;
  if (args && typeof args === "object" && !Array.isArray(args)) return JSON.stringify(args);
  return null;
}
