import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Page } from "playwright-core";
import { eventually } from "@agentrun/testing";
import { bubbleOf, inputOf, openDemo, useWidgetBrowser, watchAnswer, widgetKeyFor, type WidgetBrowser } from "./widget-browser-helpers";

// The widget's watchdog on silent streams, in Chromium: a proxy between the page and the gateway
// that stops passing a stream on without closing it (as a stuck proxy or a connection that died
// without a word does). The gateway pings every 300 ms here, so the widget gives up on a stream
// after 0.9 s of silence; its default ping is every 15 s.
const HEARTBEAT_MS = 300;

/** A stream the proxy held: when it stopped passing data on, and how many events it passed first. */
interface Held {
  at: number;
  events: number;
}

/**
 * An HTTP proxy before `target`. A request `hold` picks gets the response's first `events`
 * events (0: not even its headers), and then nothing more, on a connection kept open; the
 * gateway's side is closed (the run goes on, as for any client that went away). Every other
 * response passes through as it comes.
 */
async function holdingProxy(target: string) {
  const held: Held[] = [];
  const requests: { at: number; method: string; url: string; lastEventId: string | undefined }[] = [];
  let hold: ((req: http.IncomingMessage) => number | null) | null = null;
  const server = http.createServer((req, res) => {
    requests.push({ at: Date.now(), method: req.method!, url: req.url!, lastEventId: req.headers["last-event-id"] as string | undefined });
    const events = hold?.(req) ?? null;
    const upstream = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
      if (events === 0) {
        // Held before its answer began: not even the status line comes.
        held.push({ at: Date.now(), events });
        return void up.destroy();
      }
      const headers = { ...up.headers };
      delete headers["transfer-encoding"];
      delete headers["content-length"];
      delete headers.connection;
      res.writeHead(up.statusCode!, headers);
      if (events === null) return void up.pipe(res);
      let text = "";
      up.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8");
        const blocks = text.split("\n\n").filter((b) => b.includes("data:"));
        if (blocks.length < events || !text.includes("\n\n", text.indexOf(blocks[events - 1]!))) return;
        res.write(blocks.slice(0, events).join("\n\n") + "\n\n");
        held.push({ at: Date.now(), events });
        up.destroy();
      });
    });
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    requests,
    /** Holds the next request `pick` chooses after `events` events. */
    holdNext(pick: (req: http.IncomingMessage) => boolean, events: number) {
      hold = (req) => {
        if (!pick(req)) return null;
        hold = null;
        return events;
      };
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let wb: WidgetBrowser;
let proxy: Awaited<ReturnType<typeof holdingProxy>>;
let page: Page;

useWidgetBrowser((started) => (wb = started), { SSE_HEARTBEAT_MS: String(HEARTBEAT_MS) });

beforeAll(async () => {
  proxy = await holdingProxy(wb.stack.gatewayUrl);
});

afterAll(async () => {
  await proxy?.close();
});

beforeEach(async () => {
  proxy.requests.length = 0;
  proxy.held.length = 0;
  page = await openDemo(wb, await widgetKeyFor(wb, 1000, proxy.url), { origin: proxy.url });
  await bubbleOf(page).click();
});

afterEach(async () => {
  await page.close();
});

const reattaches = () => proxy.requests.filter((r) => r.method === "GET" && r.url.endsWith("/events"));
const posts = () => proxy.requests.filter((r) => r.method === "POST" && r.url.endsWith("/widget/run"));

describe("the widget on a stream that goes silent", () => {
  it("re-attaches after three missed pings and finishes the answer, missing and repeating nothing", async () => {
    proxy.holdNext((req) => req.method === "POST" && req.url!.endsWith("/widget/run"), 2);
    await inputOf(page).fill("[sleep:100][chunks:8] held by a stuck proxy");
    await inputOf(page).press("Enter");
    const seen = await watchAnswer(page, "Echo: held by a stuck proxy");
    await page.waitForSelector(".send:not([disabled])");
    // run_started and the first chunk came, then silence: one re-attach after them, once the
    // stream had been silent for three ping intervals.
    expect(proxy.held).toHaveLength(1);
    expect(reattaches().map((r) => r.lastEventId)).toEqual(["2"]);
    // (The page heard the last event a little after the proxy passed it on; 20 ms for clock reading.)
    expect(reattaches()[0]!.at - proxy.held[0]!.at).toBeGreaterThanOrEqual(3 * HEARTBEAT_MS - 20);
    // Every partial text on the way was a beginning of the answer: nothing repeated or skipped.
    for (const t of seen) expect("Echo: held by a stuck proxy".startsWith(t)).toBe(true);
    expect(posts()).toHaveLength(1);
    expect(await page.locator(".msg.error").count()).toBe(0);
  });

  it("gives up on a re-attach whose answer never begins, and tries again", async () => {
    proxy.holdNext((req) => req.method === "POST" && req.url!.endsWith("/widget/run"), 2);
    await inputOf(page).fill("[sleep:100][chunks:8] held twice by a stuck proxy");
    await inputOf(page).press("Enter");
    // The first re-attach gets no answer at all: the proxy holds it too.
    await eventually(async () => proxy.held.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
    proxy.holdNext((req) => req.method === "GET" && req.url!.endsWith("/events"), 0);
    await watchAnswer(page, "Echo: held twice by a stuck proxy");
    await page.waitForSelector(".send:not([disabled])");
    const tries = reattaches();
    expect(tries.map((r) => r.lastEventId)).toEqual(["2", "2"]);
    expect(proxy.held.map((h) => h.events)).toEqual([2, 0]);
    // Given up after the silence a stream is allowed (three pings, learnt from the first stream), then a backoff.
    expect(tries[1]!.at - tries[0]!.at).toBeGreaterThanOrEqual(3 * HEARTBEAT_MS);
    expect(posts()).toHaveLength(1);
    expect(await page.locator(".msg.error").count()).toBe(0);
  });

  it("keeps a quiet stream whose pings come, however long the answer takes to start", async () => {
    // Five ping intervals before the first chunk, each under the 0.9 s the widget waits.
    await inputOf(page).fill("[sleep:1500][chunks:2] slow but alive");
    await inputOf(page).press("Enter");
    await watchAnswer(page, "Echo: slow but alive");
    await page.waitForSelector(".send:not([disabled])");
    expect(posts()).toHaveLength(1);
    expect(reattaches()).toEqual([]);
    expect(await page.locator(".msg.error").count()).toBe(0);
  });
});
