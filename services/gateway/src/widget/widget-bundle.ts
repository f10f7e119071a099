import { createHash } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { brotliCompress, constants as zlib, gzip as gzipCompress } from "node:zlib";
import { build } from "esbuild";

/** The widget's browser sources (services/gateway/public/widget), entry first. */
export const WIDGET_SOURCE_DIR = path.resolve(__dirname, "../../public/widget");

/** The node_modules folder the gateway's own dependencies resolve from. */
const PACKAGES_DIR = path.resolve(path.dirname(require.resolve("eventsource-parser/package.json")), "..");

/** The script in one content coding: its bytes and a strong ETag of them. */
export interface EncodedScript {
  body: Buffer;
  etag: string;
}

/** The content codings widget.js is served in, best first (`identity`: as bundled). */
export const WIDGET_ENCODINGS = ["br", "gzip", "identity"] as const;
export type WidgetEncoding = (typeof WIDGET_ENCODINGS)[number];

export interface WidgetScript extends EncodedScript {
  /** The same script compressed once, for clients that accept it (a third of the size with brotli). */
  encoded: Record<WidgetEncoding, EncodedScript>;
}

const etagOf = (body: Buffer) => `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;

const BANNER = "/* agentrun chat widget (MIT). Includes eventsource-parser (MIT, Espen Hovlandsdal). */";

/**
 * widget.js as served: the widget's modules and the SSE parser it uses bundled into one
 * self-contained script (an IIFE, so nothing leaks into the embedding page's globals), with
 * widget.css inlined as a string, so that embedding pages make one request and their CSP has no
 * stylesheet to block (the widget adopts the styles as a constructed stylesheet of its shadow root).
 */
export async function bundleWidget(sourceDir = WIDGET_SOURCE_DIR): Promise<WidgetScript> {
  const result = await build({
    entryPoints: [path.join(sourceDir, "index.js")],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2019",
    minify: true,
    charset: "utf8",
    legalComments: "none",
    banner: { js: BANNER },
    loader: { ".css": "text" },
    // The packages it imports are the gateway's dependencies, wherever the sources are.
    nodePaths: [PACKAGES_DIR],
    logLevel: "silent",
  });
  const body = Buffer.from(result.outputFiles[0]!.contents);
  const identity = { body, etag: etagOf(body) };
  // On libuv's threads: a gateway serving streams does not stop for it.
  const [br, gzip] = await Promise.all([
    promisify(brotliCompress)(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11, [zlib.BROTLI_PARAM_SIZE_HINT]: body.length } }),
    promisify(gzipCompress)(body, { level: 9 }),
  ]);
  return { ...identity, encoded: { identity, br: { body: br, etag: etagOf(br) }, gzip: { body: gzip, etag: etagOf(gzip) } } };
}

let served: Promise<WidgetScript> | null = null;

/**
 * The widget as this process serves it: bundled once (the sources do not change while it runs),
 * again after a failure. The gateway asks for it at start-up, so that the first page to embed the
 * widget does not wait for the bundling, and a bundle that cannot be built is logged at once.
 */
export function servedWidget(): Promise<WidgetScript> {
  served ??= bundleWidget().catch((err: unknown) => {
    served = null;
    throw err;
  });
  return served;
}
