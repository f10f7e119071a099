import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Router } from "express";
import { looksLikeWidgetKey } from "@agentrun/api-keys";
import type { GatewayConfig } from "../config";
import { servedWidget, WIDGET_ENCODINGS } from "./widget-bundle";

/** services/gateway/public: the widget's sources and the demo page. */
const PUBLIC_DIR = path.resolve(__dirname, "../../public");

/**
 * How long browsers and CDNs may reuse widget.js before revalidating (ETag). Short, so a fixed
 * widget reaches every embedding page within minutes.
 * @defaultValue 300
 */
export const WIDGET_SCRIPT_MAX_AGE_S = 300;

/**
 * The demo page's policy: scripts and connections only to the gateway itself, no inline script,
 * and no inline style but the page's own (allowed by its hash); the widget styles its shadow
 * root with a constructed stylesheet, so the demo also shows it working under a strict CSP.
 */
function demoCsp(styleHash: string): string {
  return `default-src 'none'; script-src 'self'; connect-src 'self'; style-src '${styleHash}'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

interface DemoPage {
  template: string;
  csp: string;
}

async function loadDemoPage(): Promise<DemoPage> {
  const template = await readFile(path.join(PUBLIC_DIR, "widget-demo.html"), "utf8");
  const style = /<style>([\s\S]*?)<\/style>/.exec(template)?.[1] ?? "";
  return { template, csp: demoCsp(`sha256-${createHash("sha256").update(style, "utf8").digest("base64")}`) };
}

/** True when the `/widget-demo` page is served: WIDGET_DEMO, else everywhere but production. */
export function widgetDemoEnabled(config: Pick<GatewayConfig, "WIDGET_DEMO" | "NODE_ENV">): boolean {
  return config.WIDGET_DEMO ?? config.NODE_ENV !== "production";
}

/**
 * `GET /widget.js`, the embeddable script (public, cacheable, loadable from any site), and in
 * development `GET /widget-demo?key=pk_…`, a page that embeds it with that key. The demo page's
 * origin (the gateway's own) must be among the key's allowed origins.
 */
export function widgetAssetRoutes(config: Pick<GatewayConfig, "WIDGET_DEMO" | "NODE_ENV">, router: Router = Router()): Router {
  let demoPage: Promise<DemoPage> | null = null;

  router.get("/widget.js", async (req, res) => {
    const script = await servedWidget();
    // The best coding the client takes at all (a client that refuses every coding still gets the script).
    const encoding = WIDGET_ENCODINGS.find((e) => e === "identity" || req.acceptsEncodings(e) === e) ?? "identity";
    const { body, etag } = script.encoded[encoding];
    if (encoding !== "identity") res.set("Content-Encoding", encoding);
    // Pages on other sites load it with a plain <script> tag. `send` answers a matching
    // If-None-Match with 304; each coding has its own ETag, as caches keep each apart (Vary).
    res
      .type("application/javascript; charset=utf-8")
      .set({ "Cache-Control": `public, max-age=${WIDGET_SCRIPT_MAX_AGE_S}`, "Cross-Origin-Resource-Policy": "cross-origin", Vary: "Accept-Encoding", ETag: etag })
      .send(body);
  });

  if (widgetDemoEnabled(config)) {
    router.get("/widget-demo", async (req, res) => {
      demoPage ??= loadDemoPage();
      const page = await demoPage;
      const key = typeof req.query.key === "string" && looksLikeWidgetKey(req.query.key) ? req.query.key : "";
      // The key has the pk_ shape checked above (base62 only), so it is safe inside the attribute.
      const notice = key ? "" : '<p class="notice">Add <code>?key=pk_…</code> (a widget key that allows this page\'s origin) to the address to load the widget.</p>';
      const html = page.template.replaceAll("{{WIDGET_KEY}}", key || "pk_…").replace("{{NOTICE}}", notice).replace("{{WIDGET_SCRIPT}}", key ? `<script src="widget.js" data-widget-key="${key}" async></script>` : "");
      res.setHeader("Content-Security-Policy", page.csp);
      res.setHeader("Cache-Control", "no-store");
      res.type("html").send(html);
    });
  }
  return router;
}
