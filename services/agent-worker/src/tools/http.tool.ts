import { lookup } from "node:dns/promises";
import iconv from "iconv-lite";
import ipaddr from "ipaddr.js";
import { Agent, request } from "undici";
import { z } from "zod";
import { nestsDeeperThan } from "@agentrun/db";
import { defineAction, MAX_TOOL_JSON_DEPTH, StoppedBeforeStart, ToolError, type ToolContext } from "./tool";
import { LookupSlots, NoFreeSlot } from "./lookup-slots";
import { mediaTypeOf, type MediaType } from "./media-type";

export interface HttpToolLimits {
  timeoutMs: number;
  maxBytes: number;
  /** Allow private, loopback and link-local addresses (development only). */
  allowPrivate: boolean;
  /** How host names are resolved. @defaultValue the system resolver (`dns.lookup`) */
  lookup?: (hostname: string) => Promise<{ address: string; family: number }[]>;
}

const systemLookup = (hostname: string) => lookup(hostname, { all: true });

/** A URL the agent may not fetch is refused before any request: not charged. */
const REFUSED = { charged: false };

/** A host name as compared with the allow-list: lower case, no trailing dot; IPv6 literals without brackets, in one spelling. */
function normalizeHost(host: string): string {
  const h = host.toLowerCase().trim().replace(/\.$/, "").replace(/^\[(.*)\]$/, "$1");
  return h.includes(":") && ipaddr.IPv6.isValid(h) ? ipaddr.IPv6.parse(h).toNormalizedString() : h;
}

/**
 * True when `host` is on the allow-list: exact names or addresses (IPv6 with or without
 * brackets), or `*.example.com` for subdomains.
 */
export function hostAllowed(host: string, allowlist: string[]): boolean {
  const h = normalizeHost(host);
  return allowlist.some((entry) => {
    const e = normalizeHost(entry);
    if (e.startsWith("*.")) return h.endsWith(e.slice(1)) && h.length > e.length - 1;
    return h === e;
  });
}

/** Only public unicast addresses, unless private ones are explicitly allowed. */
export function addressAllowed(address: string, allowPrivate: boolean): boolean {
  if (allowPrivate) return true;
  let ip = ipaddr.parse(address);
  if (ip.kind() === "ipv6") {
    const v6 = ip as ipaddr.IPv6;
    // IPv4-mapped (::ffff:a.b.c.d), the deprecated IPv4-compatible form (::a.b.c.d) and NAT64's
    // well-known prefix (64:ff9b::a.b.c.d, which DNS64 gives IPv4-only hosts on an IPv6-only
    // network) carry an IPv4 address, judged as one.
    const nat64 = v6.parts.slice(0, 6).join(":") === [0x64, 0xff9b, 0, 0, 0, 0].join(":");
    if (v6.isIPv4MappedAddress() || nat64 || (v6.parts.slice(0, 6).every((p) => p === 0) && v6.parts[6] !== 0)) {
      ip = ipaddr.fromByteArray(v6.toByteArray().slice(12));
    }
  }
  return ip.range() === "unicast";
}

/** Looks `hostname` up in one of `slots` (see LookupSlots), for the organization `orgId`. */
async function lookUp(hostname: string, limits: HttpToolLimits, slots: LookupSlots, orgId: string, signal: AbortSignal) {
  const lookup = limits.lookup ?? systemLookup;
  try {
    return await slots.run(orgId, () => lookup(hostname), signal);
  } catch (err) {
    if (!(err instanceof NoFreeSlot)) throw err;
    // Never looked up, for lookups of others (or of this organization) the resolver is slow to
    // answer: not charged, like a calculation that found no free thread.
    if ((err.reason as Error | undefined)?.name === "TimeoutError") {
      throw new ToolError("busy", `${hostname} was not looked up: the worker's host name lookups are all waiting for slow name servers. Try again later.`, { charged: false });
    }
    // Stopped with its run while it waited for a slot: it never looked up.
    throw new StoppedBeforeStart(err.reason);
  }
}

/** Every address `hostname` has, each of them checked: the connection tries them in turn. */
async function resolvePublic(hostname: string, limits: HttpToolLimits, slots: LookupSlots, orgId: string, signal: AbortSignal): Promise<{ address: string; family: number }[]> {
  const literal = hostname.replace(/^\[|\]$/g, "");
  // The lookup counts against the timeout and stops with the run, like the request after it
  // (the lookup itself goes on, holding its slot, until the resolver answers or gives up).
  const addrs = ipaddr.isValid(literal) ? [{ address: literal, family: literal.includes(":") ? 6 : 4 }] : await lookUp(hostname, limits, slots, orgId, signal);
  const bad = addrs.find((a) => !addressAllowed(a.address, limits.allowPrivate));
  if (bad || addrs.length === 0) throw new ToolError("address_not_allowed", `${hostname} resolves to a private or reserved address.`, REFUSED);
  return addrs.map(({ address, family }) => ({ address, family }));
}

/**
 * The body as text, in the charset its Content-Type declares, or as UTF-8 when it declares none
 * or one the WHATWG Encoding Standard does not know. Labels mean what they mean to a browser
 * (ISO-8859-1 and US-ASCII are read as windows-1252); the bytes are decoded by iconv-lite, as
 * Node's own TextDecoder reads windows-1252 as Latin-1 in this release line. A byte order mark
 * at the start is dropped.
 */
export function bodyText(bytes: Buffer, label: string | undefined): string {
  let encoding = "utf-8";
  try {
    if (label) encoding = new TextDecoder(label).encoding;
  } catch {
    // A label the standard does not know (RangeError): UTF-8.
  }
  if (encoding !== "utf-8" && iconv.encodingExists(encoding)) return iconv.decode(bytes, encoding);
  return new TextDecoder(encoding).decode(bytes);
}

/**
 * Media types whose bodies are text a model can read: `text/*`, JSON, XML, scripts, forms,
 * YAML, CSV and the like, and any `+json` or `+xml` type (SVG included).
 */
const TEXT_MEDIA = /^(text\/.+|application\/(json|xml|javascript|ecmascript|x-javascript|x-www-form-urlencoded|x-ndjson|ndjson|jsonl|yaml|x-yaml|toml|graphql|sql|csv|rtf)|[a-z0-9.+-]+\/[a-z0-9.+-]+\+(json|xml)|message\/.+)$/;

/**
 * Whether a body is text by its media type: true or false for a type that says, null for none
 * (a missing or malformed Content-Type) or one that does not (then the bytes tell: see
 * {@link looksBinary}).
 */
function textByType(media: MediaType | null): boolean | null {
  if (!media || media.type === "application/octet-stream") return null;
  return TEXT_MEDIA.test(media.type);
}

/** A body with a NUL byte in its first kilobyte is not text (what file(1) and git also go by). */
const looksBinary = (bytes: Buffer) => bytes.subarray(0, 1024).includes(0);

/**
 * What went wrong, in words: a connection that tried several addresses fails with an
 * AggregateError whose own message is empty; its addresses' errors say why.
 */
function failureText(err: unknown): string {
  // (By shape: an error of another realm is no instance of this one's AggregateError.)
  const errors = (err as { errors?: unknown } | null)?.errors;
  if (Array.isArray(errors) && errors.length) return errors.map((e: unknown) => (e as Error)?.message ?? String(e)).join("; ");
  return (err as Error)?.message ?? String(err);
}

export function httpGetAction(limits: HttpToolLimits) {
  const slots = new LookupSlots();
  return defineAction({
    tool: "http",
    action: "get",
    description: "Fetches a URL with HTTP GET (only hosts the agent allows) and returns status, content type and up to a size limit of the body.",
    params: z.strictObject({ url: z.string().url().max(2048).describe("Absolute http(s) URL") }),
    async run({ url }, ctx: ToolContext) {
      const target = new URL(url);
      if (target.protocol !== "http:" && target.protocol !== "https:") throw new ToolError("invalid_url", "Only http and https URLs can be fetched.", REFUSED);
      if (!hostAllowed(target.hostname, ctx.httpAllowlist)) throw new ToolError("host_not_allowed", `The agent may not fetch from ${target.hostname}.`, REFUSED);
      // A timer of our own rather than AbortSignal.timeout, which can be collected (and never
      // fire) while only the combined signal refers to it.
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(new DOMException(`No answer within ${limits.timeoutMs} ms`, "TimeoutError")), limits.timeoutMs);
      const signal = AbortSignal.any([ctx.signal, timeout.signal]);
      let dispatcher: Agent | undefined;
      try {
        const resolved = await resolvePublic(target.hostname, limits, slots, ctx.orgId, signal);
        // Connect to the addresses that were checked, so DNS cannot change between check and
        // use; one that does not answer (an unroutable IPv6 address, a host that is down) gives
        // way to the next, as Node's autoSelectFamily tries them in turn.
        dispatcher = new Agent({
          connect: { autoSelectFamily: true, lookup: (_h, _o, cb) => cb(null, resolved as never) },
          maxResponseSize: -1,
        });
        const res = await request(target, { method: "GET", dispatcher, signal, headers: { "user-agent": "agentrun-http-tool/1", accept: "*/*" } });
        const contentType = String(res.headers["content-type"] ?? "");
        const length = Number(res.headers["content-length"]);
        const declared = Number.isSafeInteger(length) && length >= 0 ? length : null;
        // An image, a PDF, an archive: its bytes read as text would be thousands of tokens of
        // nothing for the model (and its bill). Said so, not read.
        const location = res.headers.location ? { location: String(res.headers.location) } : {};
        const binary = (size: number | null) => ({ status: res.statusCode, content_type: contentType, body: null, binary: true, size, truncated: false, ...location });
        const media = mediaTypeOf(res.headers["content-type"]);
        const textual = textByType(media);
        if (textual === false) {
          // Dropped unread: the error its destruction emits is of no interest.
          res.body.on("error", () => {}).destroy();
          return binary(declared);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        for await (const chunk of res.body) {
          const buf = chunk as Buffer;
          if (size + buf.length > limits.maxBytes) {
            chunks.push(buf.subarray(0, limits.maxBytes - size));
            truncated = true;
            res.body.destroy();
            break;
          }
          chunks.push(buf);
          size += buf.length;
        }
        const bytes = Buffer.concat(chunks);
        if (textual === null && looksBinary(bytes)) return binary(truncated ? declared : size);
        const text = bodyText(bytes, media?.charset);
        let body: unknown = text;
        // (Media types are case-insensitive: Application/JSON is JSON too.) JSON nested too deeply
        // to handle stays text.
        if (!truncated && media?.type.includes("json") && !nestsDeeperThan(Buffer.from(text), MAX_TOOL_JSON_DEPTH)) {
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
        }
        return { status: res.statusCode, content_type: contentType, body, truncated, ...location };
      } catch (err) {
        if (err instanceof ToolError) throw err;
        if (ctx.signal.aborted) throw err;
        const timedOut = (err as Error).name === "TimeoutError" || (err as Error).name === "AbortError";
        throw new ToolError(timedOut ? "timeout" : "fetch_failed", timedOut ? `No answer from ${target.hostname} within ${limits.timeoutMs} ms.` : `Fetching ${url} failed: ${failureText(err)}`);
      } finally {
        clearTimeout(timer);
        void dispatcher?.close();
      }
    },
  });
}
