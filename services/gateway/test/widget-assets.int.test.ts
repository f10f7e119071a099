import { get } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { generateWidgetKey } from "@agentrun/api-keys";
import { startStack, type Stack } from "@agentrun/testing";
import { bundleWidget } from "../src/widget/widget-bundle";

// The widget's script and demo page as a gateway serves them (no widget key is looked up: the demo
// page takes any key of the right shape, and widget.js is public).
let stack: Stack;
const key = generateWidgetKey();

beforeAll(async () => {
  stack = await startStack({ workers: 0, gatewayEnv: { WIDGET_DEMO: "true" } });
});

afterAll(async () => {
  await stack?.stop();
});

describe("the widget's assets", () => {
  it("serves widget.js as cacheable JavaScript that any site may load", async () => {
    const res = await fetch(`${stack.gatewayUrl}/widget.js`, { headers: { "accept-encoding": "identity" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("content-type")).toBe("application/javascript; charset=utf-8");
    expect(res.headers.get("cache-control")).toMatch(/max-age=300/);
    expect(res.headers.get("etag")).toBeTruthy();
    expect(res.headers.get("cross-origin-resource-policy")).toBe("cross-origin");
    const script = await res.text();
    // The bundle of public/widget, byte for byte.
    expect(res.headers.get("etag")).toBe((await bundleWidget()).etag);
    expect(script).toContain("data-widget-key");
    // widget.css inlined as the styles' string.
    expect(script).not.toContain("{{WIDGET_STYLES}}");
    expect(script).toContain(".bubble{position:fixed;");
    // A browser revalidating (fetch itself would add "no-cache" to a request with If-None-Match).
    const again = await fetch(`${stack.gatewayUrl}/widget.js`, { headers: { "accept-encoding": "identity", "if-none-match": res.headers.get("etag")!, "cache-control": "max-age=0" } });
    expect(again.status).toBe(304);
    // OPTIONS is a method these paths do not serve, answered in the contract's error shape.
    for (const path of ["/widget.js", "/widget-demo"]) {
      const options = await fetch(`${stack.gatewayUrl}${path}`, { method: "OPTIONS" });
      expect([path, options.status, ((await options.json()) as any).error.code]).toEqual([path, 404, "not_found"]);
    }
  });

  it("compresses widget.js for clients that accept brotli (preferred) or gzip, each coding with its own ETag", async () => {
    const bundle = await bundleWidget();
    /** The raw answer (fetch would decompress it). */
    const raw = (headers: Record<string, string>) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        get(`${stack.gatewayUrl}/widget.js`, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        }).on("error", reject);
      });
    const br = await raw({ "accept-encoding": "gzip, deflate, br" });
    const gzip = await raw({ "accept-encoding": "gzip, deflate, br;q=0" });
    const none = await raw({ "accept-encoding": "identity;q=0, *;q=0" });
    expect([br.status, br.headers["content-encoding"], br.headers.vary]).toEqual([200, "br", "Accept-Encoding"]);
    expect(brotliDecompressSync(br.body).equals(bundle.body)).toBe(true);
    expect(br.body.length).toBeLessThan(bundle.body.length / 2);
    expect([gzip.status, gzip.headers["content-encoding"]]).toEqual([200, "gzip"]);
    expect(gunzipSync(gzip.body).equals(bundle.body)).toBe(true);
    // A client that refuses every coding still gets the script, uncompressed.
    expect([none.status, none.headers["content-encoding"], none.body.equals(bundle.body)]).toEqual([200, undefined, true]);
    const etags = [br.headers.etag, gzip.headers.etag, none.headers.etag];
    expect(new Set(etags).size).toBe(3);
    expect(none.headers.etag).toBe(bundle.etag);
    const revalidated = await raw({ "accept-encoding": "br", "if-none-match": String(br.headers.etag) });
    expect([revalidated.status, revalidated.body.length]).toEqual([304, 0]);
  });

  it("serves the demo page with the key from ?key=, and nothing else from the query", async () => {
    const page = await fetch(`${stack.gatewayUrl}/widget-demo?key=${key}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toMatch(/script-src 'self'/);
    expect(await page.text()).toContain(`<script src="widget.js" data-widget-key="${key}" async></script>`);
    const injected = await (await fetch(`${stack.gatewayUrl}/widget-demo?key=${encodeURIComponent('"><script>alert(1)</script>')}`)).text();
    expect(injected).not.toContain("alert(1)");
    expect(injected).not.toContain("<script src=");
  });
});
