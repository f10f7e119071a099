import { createHash } from "node:crypto";
import path from "node:path";
import { build } from "esbuild";

/** The widget's browser sources (services/gateway/public/widget), entry first. */
export const WIDGET_SOURCE_DIR = path.resolve(__dirname, "../../public/widget");

/** The node_modules folder the gateway's own dependencies resolve from. */
const PACKAGES_DIR = path.resolve(path.dirname(require.resolve("eventsource-parser/package.json")), "..");

export interface WidgetScript {
  body: Buffer;
  /** A strong ETag of `body`, computed once. */
  etag: string;
}

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
  return { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` };
}
