import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import type { Page, Route } from "playwright-core";
import { QUERY_MAX_CHARS } from "@agentrun/contracts";
import { eventually } from "@agentrun/testing";
import { bubbleOf, inputOf, isFocused, lastAnswerOf, openDemo as openDemoOf, startWidgetBrowser, watchAnswer as watchAnswerOf, widgetKeyFor as widgetKeyOf, type WidgetBrowser } from "./widget-browser-helpers";

// The widget end to end in a real browser (Debian's Chromium, driven by playwright-core): the
// demo page embeds widget.js, which talks to the widget gateway of a real stack. Sessions shared
// by tabs, stored sessions and embedding pages are in widget-browser-session.int.test.ts.
const SCREENSHOT = path.resolve(__dirname, "../../../test-artifacts/widget.png");

let wb: WidgetBrowser;
let page: Page;

beforeAll(async () => {
  wb = await startWidgetBrowser();
}, 60_000);

afterAll(async () => {
  await wb?.stop();
});

const pageErrors = () => wb.pageErrors;
const widgetKeyFor = (credits?: number) => widgetKeyOf(wb, credits);
const openDemo = (key: string) => openDemoOf(wb, key);
const bubble = () => bubbleOf(page);
const input = () => inputOf(page);
const lastAnswer = () => lastAnswerOf(page);
const watchAnswer = (final: string, timeoutMs?: number) => watchAnswerOf(page, final, timeoutMs);

describe("the embedded widget in Chromium", () => {
  let key: string;
  beforeAll(async () => {
    key = await widgetKeyFor();
    page = await openDemo(key);
  });

  it("opens from the keyboard as an accessible dialog with the focus in its input", async () => {
    await bubble().waitFor();
    expect(await bubble().getAttribute("aria-expanded")).toBe("false");
    await bubble().focus();
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: "Assistant chat" });
    await dialog.waitFor({ state: "visible" });
    expect(await bubble().getAttribute("aria-expanded")).toBe("true");
    expect(await page.getByRole("log").getAttribute("aria-live")).toBe("polite");
    expect(await isFocused(input())).toBe(true);
  });

  it("streams the answer into the log as it arrives", async () => {
    await page.keyboard.type("[sleep:150][chunks:12] hello from the browser");
    await page.keyboard.press("Enter");
    const final = "Echo: hello from the browser";
    const seen = await watchAnswer(final);
    const partial = seen.filter((t) => t !== "" && t !== final);
    expect(partial.length).toBeGreaterThanOrEqual(3);
    for (const t of partial) expect(final.startsWith(t)).toBe(true);
    expect(await page.locator(".msg.user").last().textContent()).toBe("[sleep:150][chunks:12] hello from the browser");
    // The send button is disabled while an answer is being written, and enabled once the run ends.
    await page.waitForSelector(".send:not([disabled])");
  });

  it("completes an answer after a page reload mid-stream, re-attaching with Last-Event-ID", async () => {
    const reattached: string[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/api/v1/widget/tasks/") && r.url().endsWith("/events")) reattached.push(r.headers()["last-event-id"] ?? "");
    });
    await input().fill("[sleep:250][chunks:16] this answer survives a reload");
    await input().press("Enter");
    const final = "Echo: this answer survives a reload";
    // Reload once part of the new answer (the greeting and the first answer come before it) is shown.
    const midAnswer = async () => (await page.locator(".msg.assistant").count()) === 3 && !["", final].includes((await lastAnswer().textContent()) ?? "");
    for (const deadline = Date.now() + 15_000; !(await midAnswer()); await page.waitForTimeout(30)) {
      if (Date.now() > deadline) throw new Error(`no partial answer; log: ${JSON.stringify(await page.locator(".msg").allTextContents())}`);
    }
    await page.reload();

    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    const seen = await watchAnswer(final);
    expect(seen.at(-1)).toBe(final);
    expect(reattached.length).toBeGreaterThanOrEqual(1);
    expect(Number(reattached[0])).toBeGreaterThan(1);
    // The conversation survived the reload too, in order.
    expect(await page.locator(".msg.user").allTextContents()).toEqual(["[sleep:150][chunks:12] hello from the browser", "[sleep:250][chunks:16] this answer survives a reload"]);
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", "Echo: hello from the browser", final]);

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(0);
  });

  it("shows tool activity while a tool runs", async () => {
    // Record every text put into the widget (a tool's status line lasts only milliseconds).
    // (A string: this project's TypeScript has no DOM types.)
    await page.evaluate(`
      window.__widgetTexts = [];
      new MutationObserver((records) => {
        for (const r of records) for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.__widgetTexts.push(n.textContent);
      }).observe(document.querySelector("agentrun-chat").shadowRoot, { childList: true, subtree: true });
    `);
    await page.waitForSelector(".send:not([disabled])");
    await input().fill('[call:calc_evaluate {"expression":"6*7"}]');
    await input().press("Enter");
    await watchAnswer('Tool calc_evaluate returned: {"expression":"6*7","result":42}');
    expect(await page.evaluate("window.__widgetTexts")).toContain("Using calc…");
    expect(await lastAnswer().locator(".status").isHidden()).toBe(true);
  });

  it("keeps the text of an answer that failed partway, with a note under it", async () => {
    await page.waitForSelector(".send:not([disabled])");
    // The model's stream ends after its first chunk: the run fails with that chunk streamed.
    await input().fill("[chunks:3][cut] half an answer");
    await input().press("Enter");
    await page.waitForSelector(".send:not([disabled])");
    const answer = lastAnswer();
    expect(await answer.locator(".text").textContent()).toBe("Echo: h");
    expect(await answer.locator(".status").textContent()).toBe("Something went wrong before this answer was finished. Please try again.");
    expect(await page.locator(".msg").last().getAttribute("class")).toBe("msg assistant");
  });

  it("notes an answer the model cut short, and stores no empty answer for one that said nothing", async () => {
    const p = await openDemo(await widgetKeyFor());
    await bubbleOf(p).click();
    const send = async (text: string) => {
      await inputOf(p).fill(text);
      await inputOf(p).press("Enter");
      await p.waitForSelector(".send:not([disabled])");
    };
    // A first message has no earlier ones: [history] makes an answer without text, which the filter ends.
    await send("[history][finish:content_filter] nothing to say");
    await send("[finish:length][chunks:3] cut at the limit");
    await send("[finish:content_filter][chunks:2] partly withheld");
    // Each message's class and text (a note under it included), as shown and as shown again after a reload.
    const shown = () => p.locator(".msg").evaluateAll((ms) => ms.map((m) => [m.className, m.textContent]));
    const expected = [
      ["msg assistant", "Hi! How can I help you today?"],
      ["msg user", "[history][finish:content_filter] nothing to say"],
      ["msg error", "Sorry, no answer came back. Please try again, or put your message another way."],
      ["msg user", "[finish:length][chunks:3] cut at the limit"],
      ["msg assistant", "Echo: cut at the limit" + "This answer was cut short: it reached the length the assistant may write."],
      ["msg user", "[finish:content_filter][chunks:2] partly withheld"],
      ["msg assistant", "Echo: partly withheld" + "The rest of this answer was withheld by a content filter."],
    ];
    expect(await shown()).toEqual(expected);
    await p.reload();
    await p.locator(".msg.error").waitFor();
    expect(await shown()).toEqual(expected);
    await p.close();
  });

  it("keeps the text read so far when the key is revoked mid-answer, with a note under it", async () => {
    const revokedKey = await widgetKeyFor();
    const p = await openDemo(revokedKey);
    await bubbleOf(p).click();
    await inputOf(p).fill("[sleep:300][chunks:30] an answer long enough to be cut by a revocation of its key");
    await inputOf(p).press("Enter");
    await eventually(async () => ((await lastAnswerOf(p).locator(".text").textContent()) ?? "").startsWith("Echo:"), { timeoutMs: 10_000, intervalMs: 50 });
    await wb.prisma.widgetKey.update({ where: { key: revokedKey }, data: { revokedAt: new Date() } });
    // The stream ends, its re-attach is refused (401): the answer ends there.
    await p.waitForSelector(".send:not([disabled])", { timeout: 15_000 });
    const text = (await lastAnswerOf(p).locator(".text").textContent()) ?? "";
    expect(text.startsWith("Echo:") && text.length < "Echo: an answer long enough to be cut by a revocation of its key".length).toBe(true);
    expect(await lastAnswerOf(p).locator(".status").textContent()).toBe("Something went wrong before this answer was finished. Please try again.");
    await p.close();
  });

  it("says so when a paste is cut at the API's longest message, and sends what is left", async () => {
    expect(await input().getAttribute("maxlength")).toBe(String(QUERY_MAX_CHARS));
    const note = page.getByRole("status").filter({ hasText: "characters; the rest was left out" });
    expect(await note.isHidden()).toBe(true);
    await input().focus();
    // As a paste: the browser applies maxlength to inserted text.
    await page.keyboard.insertText("Echo me. " + "x".repeat(QUERY_MAX_CHARS));
    expect((await input().inputValue()).length).toBe(QUERY_MAX_CHARS);
    await note.waitFor({ state: "visible" });
    expect(await note.textContent()).toBe("A message holds up to 32,000 characters; the rest was left out.");
    // Under the limit again, the note goes.
    await page.keyboard.press("Backspace");
    await note.waitFor({ state: "hidden" });
    await page.keyboard.insertText("y");
    await note.waitFor({ state: "visible" });
    await page.keyboard.press("Enter");
    await note.waitFor({ state: "hidden" });
    await watchAnswer("Echo: Echo me. " + "x".repeat(QUERY_MAX_CHARS - "Echo me. ".length - 1) + "y", 30_000);
  });

  it("closes on Escape and gives the focus back to the bubble", async () => {
    await input().focus();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "hidden" });
    expect(await bubble().getAttribute("aria-expanded")).toBe("false");
    expect(await isFocused(bubble())).toBe(true);
  });

  it("tells the visitor when the organization is out of credits", async () => {
    const broke = await openDemo(await widgetKeyFor(0));
    await broke.getByRole("button", { name: "Chat with Assistant" }).click();
    const box = broke.getByRole("textbox", { name: "Your message" });
    await box.fill("hello?");
    await box.press("Enter");
    await broke.locator(".msg.error").getByText("This assistant is out of credits right now").waitFor();
    await broke.close();
    expect(pageErrors()).toEqual([]);
  });
});

// Streams cut short and re-attaches refused, staged by intercepting the page's requests: each
// request still goes to the real gateway (route.fetch) unless the test answers it itself.
describe("the widget re-attaching to a cut stream", () => {
  const RUN = "**/api/v1/widget/run";
  const EVENTS = "**/api/v1/widget/tasks/*/runs/*/events";

  /** The events of an SSE body (without keepalive comments), each with its blank line. */
  const sseEvents = (body: string) =>
    body
      .split("\n\n")
      .filter((block) => block.includes("data:"))
      .map((block) => `${block}\n\n`);
  /** The first `n` events of an SSE body: what a stream cut right after them delivered. */
  const firstEvents = (body: string, n: number) => sseEvents(body).slice(0, n).join("");
  /** Passes the request to the gateway, then ends the stream after `n` events. */
  const cutAfter = (n: number) => async (route: Route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: firstEvents(await response.text(), n) });
  };
  const refuse = (route: Route, status: number, retryAfterS: number) =>
    route.fulfill({ status, headers: { "Retry-After": String(retryAfterS) }, contentType: "application/json", body: JSON.stringify({ error: { code: status === 429 ? "rate_limited" : "unavailable", message: "Try again later." } }) });

  beforeEach(async () => {
    page = await openDemo(await widgetKeyFor());
    await bubble().click();
  });
  afterEach(async () => {
    await page.close();
    expect(pageErrors()).toEqual([]);
  });

  it("retries a re-attach answered 503, then 429, after the Retry-After each asks, and finishes the answer", async () => {
    const reattaches: { at: number; lastEventId: string | undefined }[] = [];
    await page.route(RUN, cutAfter(2));
    await page.route(EVENTS, async (route) => {
      reattaches.push({ at: Date.now(), lastEventId: route.request().headers()["last-event-id"] });
      if (reattaches.length === 1) return refuse(route, 503, 2);
      if (reattaches.length === 2) return refuse(route, 429, 1);
      return route.continue();
    });
    await input().fill("[chunks:6] cut short, then refused twice");
    await input().press("Enter");
    await watchAnswer("Echo: cut short, then refused twice");
    // run_started and the first chunk (seq 1 and 2) arrived before the cut.
    expect(reattaches.map((r) => r.lastEventId)).toEqual(["2", "2", "2"]);
    expect(reattaches[1]!.at - reattaches[0]!.at).toBeGreaterThanOrEqual(1900);
    expect(reattaches[2]!.at - reattaches[1]!.at).toBeGreaterThanOrEqual(900);
    await page.waitForSelector(".send:not([disabled])");
    expect(await page.locator(".msg.error").count()).toBe(0);
  });

  it("sends the message again, the same request, when a proxy answers it 502 after the gateway accepted the run", async () => {
    const keys: (string | undefined)[] = [];
    await page.route(RUN, async (route) => {
      keys.push(route.request().headers()["idempotency-key"]);
      if (keys.length > 1) return route.continue();
      // The gateway accepts the run (and streams its answer), but the page gets a proxy's 502.
      await (await route.fetch()).text();
      return route.fulfill({ status: 502, contentType: "text/html", body: "<html><body>Bad Gateway</body></html>" });
    });
    await input().fill("[chunks:3] answered behind a proxy");
    await input().press("Enter");
    await watchAnswer("Echo: answered behind a proxy");
    // Sent again with its key: the gateway answered with the run it had started.
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    await page.waitForSelector(".send:not([disabled])");
    expect(await page.locator(".msg.error").count()).toBe(0);
  });

  it("completes a long answer whose every stream is cut after one event", async () => {
    // How many events each re-attach could have delivered; the page gets only the first.
    const available: number[] = [];
    await page.route(RUN, cutAfter(2));
    await page.route(EVENTS, async (route) => {
      const response = await route.fetch();
      const body = await response.text();
      available.push(sseEvents(body).length);
      await route.fulfill({ response, body: firstEvents(body, 1) });
    });
    await input().fill("[chunks:10] one event at a time");
    await input().press("Enter");
    await watchAnswer("Echo: one event at a time", 30_000);
    // The text is whole before run_completed, the last event, has come: wait for the run's end.
    await page.waitForSelector(".send:not([disabled])");
    // One re-attach per event after the cut, many more than the tries allowed in a row without a new event.
    const after = available[0]!;
    expect(after).toBeGreaterThanOrEqual(8);
    expect(available).toEqual(Array.from({ length: after }, (_, i) => after - i));
    expect(await page.locator(".msg.error").count()).toBe(0);
  });
});
