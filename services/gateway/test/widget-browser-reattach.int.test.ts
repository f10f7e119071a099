import type { Page, Route } from "playwright-core";
import { cutRunAfter, EVENT_REQUESTS, inputOf, lastAnswerOf, openDemo, openPanel, refuseWith, untilTriesStop, useWidgetBrowser, watchAnswer, widgetKeyFor, type WidgetBrowser } from "./widget-browser-helpers";

// How the widget ends an answer whose stream was cut, in a real browser: re-attaches that stop,
// answer, or bring what the page did not expect.
let wb: WidgetBrowser;
useWidgetBrowser((started) => (wb = started));

const NETWORK_NOTE = "Can't reach the assistant right now. Please check your connection and try again.";
const storedRoles = async (p: Page, key: string) => ((await p.evaluate(`JSON.parse(localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}`)}))`)) as { messages: { role: string }[] }).messages.map((m) => m.role);

/** The demo page of a new widget key, its panel open, after `beforeLoad`; and the key. */
async function openWith(beforeLoad: (p: Page) => Promise<void>): Promise<{ page: Page; key: string }> {
  const key = await widgetKeyFor(wb);
  const page = await openDemo(wb, key, { beforeLoad });
  await openPanel(page);
  return { page, key };
}

async function send(page: Page, text: string): Promise<void> {
  await inputOf(page).fill(text);
  await inputOf(page).press("Enter");
}

describe("an answer whose re-attaches stop", () => {
  it("keeps its text with a note, and finishes when the browser is back online, once", async () => {
    let reachable = false;
    const { page } = await openWith(async (p) => {
      // A fake clock: the five tries and their growing waits pass in no time.
      await p.clock.install();
      // The stream is cut after run_started and two chunks; re-attaches fail until `reachable`.
      await cutRunAfter(p, 3);
      await p.route(EVENT_REQUESTS, (route: Route) => (reachable ? route.continue() : route.abort("internetdisconnected")));
    });
    const final = "Echo: kept through a long outage";
    await send(page, "[chunks:8] kept through a long outage");
    expect(await untilTriesStop(page)).toBe(NETWORK_NOTE);
    const partial = (await lastAnswerOf(page).locator(".text").textContent()) ?? "";
    expect(partial.length).toBeGreaterThan(0);
    expect(final.startsWith(partial) && partial !== final).toBe(true);
    expect(await page.locator(".msg.error").count()).toBe(0);

    // A message sent meanwhile first tries the answer before it again; still out of reach, it is
    // put back in the input, unsent, and the answer stays pending.
    await send(page, "[chunks:2] a second question");
    for (const deadline = Date.now() + 20_000; (await inputOf(page).inputValue()) === ""; ) {
      if (Date.now() > deadline) throw new Error("the second message never came back to the input");
      await page.clock.fastForward(20_000);
      await page.waitForTimeout(50);
    }
    expect(await inputOf(page).inputValue()).toBe("[chunks:2] a second question");
    expect(await page.locator(".msg.user").count()).toBe(1);
    const note = lastAnswerOf(page).locator(".status");
    expect(await note.textContent()).toBe(NETWORK_NOTE);
    await inputOf(page).fill("");

    reachable = true;
    await page.evaluate("window.dispatchEvent(new Event('online'))");
    await watchAnswer(page, final);
    expect(await note.isHidden()).toBe(true);
    await page.reload();
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", final]);
    await page.close();
  });

  it("says the assistant is unavailable, not the visitor's connection, when the gateway answered the tries 503", async () => {
    const { page } = await openWith(async (p) => {
      await p.clock.install();
      await cutRunAfter(p, 3);
      await p.route(EVENT_REQUESTS, (route: Route) => refuseWith(route, 503));
    });
    await send(page, "[chunks:8] the gateway is in trouble");
    expect(await untilTriesStop(page)).toBe("Sorry, the assistant is unavailable right now.");
    expect((await lastAnswerOf(page).locator(".text").textContent())?.startsWith("Echo:")).toBe(true);
    await page.close();
  });
});

describe("a re-attach answered 204, the run over and nothing after the last event received", () => {
  it("says no answer came back when no text had come, and stores no empty answer", async () => {
    const { page, key } = await openWith(async (p) => {
      await cutRunAfter(p, 1);
      await p.route(EVENT_REQUESTS, (route: Route) => route.fulfill({ status: 204 }));
    });
    await send(page, "[chunks:3] over before a word");
    await page.locator(".msg.error").getByText("Sorry, no answer came back. Please try again, or put your message another way.").waitFor({ timeout: 15_000 });
    await page.waitForSelector(".send:not([disabled])");
    expect(await storedRoles(page, key)).toEqual(["user", "error"]);
    await page.close();
  });
});

describe("an answer that holds events the service lost", () => {
  it("ends with the run's terminal event, sent with a lower seq to its re-attach past the run's end", async () => {
    // The stream brings run_started, two chunks and a chunk numbered far past the run's end
    // (as a worker's events that its death and a Redis restart lost), then is cut.
    const lost = `id: 500\ndata: ${JSON.stringify({ seq: 500, type: "text_chunk", content: " (lost)" })}`;
    const { page } = await openWith((p) => cutRunAfter(p, 3, [lost]));
    await send(page, "[chunks:6] past the end");
    const seen = await watchAnswer(page, /^Echo: .* \(lost\)$/);
    // Completed as received, with no note: the re-attach (Last-Event-ID 500) brought the end.
    await page.waitForSelector(".send:not([disabled])");
    expect(await lastAnswerOf(page).locator(".status").isHidden()).toBe(true);
    await page.reload();
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", seen.at(-1)]);
    await page.close();
  });
});

describe("an event without a seq", () => {
  it("is skipped, and the answer re-attaches after the last event that had one", async () => {
    const lastEventIds: string[] = [];
    const stray = `data: ${JSON.stringify({ type: "text_chunk", content: " (stray)" })}`;
    const { page } = await openWith(async (p) => {
      await cutRunAfter(p, 3, [stray]);
      p.on("request", (r) => {
        if (r.url().endsWith("/events")) lastEventIds.push(r.headers()["last-event-id"] ?? "");
      });
    });
    await send(page, "[chunks:6] numbered events only");
    await page.waitForSelector(".send:not([disabled])", { timeout: 15_000 });
    expect(await lastAnswerOf(page).textContent()).toBe("Echo: numbered events only");
    expect(lastEventIds).toEqual(["3"]);
    await page.close();
  });
});
