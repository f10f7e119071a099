import type { BrowserContext, Page, Route } from "playwright-core";
import { eventually } from "@agentrun/testing";
import { agentOfKey, ask, bubbleOf, cutRunAfter, EVENT_REQUESTS, inputOf, isFocused, openDemo, openPanel, refuseWith, until, untilTriesStop, useWidgetBrowser, watchAnswer, widgetKeyFor, type WidgetBrowser } from "./widget-browser-helpers";

// The widget's stored session in a real browser: tabs that share it, a session stored in a shape
// this script does not write, and pages that embed the widget in ways of their own (twice, under
// CSS aimed at everything). Answers whose re-attaches stop are in widget-browser-reattach.int.test.ts.
let wb: WidgetBrowser;
useWidgetBrowser((started) => (wb = started));

const agentOf = (key: string) => agentOfKey(wb, key);

describe("tabs of one browser", () => {
  it("share one visitor and one conversation, and each shows what the others said", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    // Both tabs open before the visitor has a session: the defect was two visitors, the last tab's transcript kept.
    const [a, b] = [await openDemo(wb, key, { context }), await openDemo(wb, key, { context })];
    await openPanel(a);
    await ask(a, "[chunks:3] from tab A", "Echo: from tab A");
    await openPanel(b);
    // B continues A's task: the model sees A's message before B's.
    await ask(b, "[history] from tab B", "[chunks:3] from tab A");
    const users = ["[chunks:3] from tab A", "[history] from tab B"];
    // (Strings for the page: this project's TypeScript has no DOM types.)
    await a.waitForFunction(`document.querySelector("agentrun-chat").shadowRoot.querySelectorAll(".msg.user").length === ${users.length}`);
    expect(await a.locator(".msg.user").allTextContents()).toEqual(users);
    const c = await openDemo(wb, key, { context });
    expect(await c.locator(".msg.user").allTextContents()).toEqual(users);
    expect(await c.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", "Echo: from tab A", "[chunks:3] from tab A"]);

    const tasks = await wb.prisma.task.findMany({ where: { agentId: await agentOf(key) }, include: { runs: true } });
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!.runs).toHaveLength(2);
    expect(tasks[0]!.userId).toMatch(/^visitor:/);
    await context.close();
  });

  it("leave another tab's answer in progress stored when their own message is refused", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    const [a, b] = [await openDemo(wb, key, { context }), await openDemo(wb, key, { context })];
    await openPanel(a);
    await ask(a, "[chunks:2] first", "Echo: first");
    await inputOf(a).fill("[sleep:150][chunks:20] a long answer in tab A");
    await inputOf(a).press("Enter");
    const stored = (p: Page) => p.evaluate(`localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}:pending`)})`) as Promise<string | null>;
    for (const deadline = Date.now() + 10_000; (await stored(b)) === null; await b.waitForTimeout(30)) {
      if (Date.now() > deadline) throw new Error("tab A's answer in progress was never stored");
    }
    const runOfA = JSON.parse((await stored(b))!).runId as string;
    // B's message goes to the same task, whose run is still going: 409.
    await openPanel(b);
    await inputOf(b).fill("meanwhile in tab B");
    await inputOf(b).press("Enter");
    await b.locator(".msg.error").getByText("The previous answer is still being written").waitFor();
    expect(JSON.parse((await stored(b)) ?? "null")?.runId).toBe(runOfA);
    // Reloaded mid-answer, A picks its answer up from what is stored.
    await a.reload();
    await watchAnswer(a, "Echo: a long answer in tab A");
    await context.close();
  });
});

describe("tabs following one answer", () => {
  /** A tab opened after another opened the panel: the panel is open there too. */
  const panelShown = (p: Page) => p.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
  const storedSession = (p: Page, key: string) => p.evaluate(`JSON.parse(localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}`)}))`) as Promise<{ messages: { role: string }[] }>;

  /** A tab that sends `query`, whose stream is cut after `events` events and whose re-attaches are answered 503 until they stop. */
  const tabWhoseTriesStopped = async (key: string, context: BrowserContext, events: number, query: string): Promise<Page> => {
    const a = await openDemo(wb, key, {
      context,
      beforeLoad: async (p) => {
        await p.clock.install();
        await cutRunAfter(p, events);
        await p.route(EVENT_REQUESTS, (route: Route) => refuseWith(route, 503));
      },
    });
    await openPanel(a);
    await inputOf(a).fill(query);
    await inputOf(a).press("Enter");
    await untilTriesStop(a);
    return a;
  };

  it("note a run's failure once in the shared transcript", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    const a = await openDemo(wb, key, { context });
    await openPanel(a);
    await inputOf(a).fill("[sleep:4000][error:500] fails later");
    await inputOf(a).press("Enter");
    const pending = `localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}:pending`)}) !== null`;
    await until(a, pending);
    // A second tab opened mid-answer follows the same run.
    const b = await openDemo(wb, key, { context });
    await panelShown(b);
    await Promise.all([a, b].map((p) => p.locator(".msg.error").first().waitFor()));
    // Each tab is done with the answer (and has noted its end) once its composer is enabled again.
    await Promise.all([a, b].map((p) => p.waitForSelector(".send:not([disabled])")));
    expect((await storedSession(a, key)).messages.map((m) => m.role)).toEqual(["user", "error"]);
    await context.close();
  });

  it("note a re-attach refused for good once in the shared transcript", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    // Tab A's stream ends after run_started; its re-attach is refused (404) once tab B's has been.
    let release = () => {};
    const bRefused = new Promise<void>((resolve) => (release = resolve));
    const a = await openDemo(wb, key, { context, beforeLoad: (p) => cutRunAfter(p, 1) });
    await a.route(EVENT_REQUESTS, async (route: Route) => {
      await bRefused;
      await refuseWith(route, 404);
    });
    await openPanel(a);
    await inputOf(a).fill("[sleep:500][chunks:2] refused in both tabs");
    await inputOf(a).press("Enter");
    await until(a, `localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}:pending`)}) !== null`);
    const refuseAll = async (p: Page) => {
      await p.route(EVENT_REQUESTS, (route: Route) => refuseWith(route, 404));
    };
    const b = await openDemo(wb, key, { context, beforeLoad: refuseAll });
    await b.locator(".msg.error").waitFor();
    await b.waitForSelector(".send:not([disabled])");
    release();
    await a.locator(".msg.error").first().waitFor();
    await a.waitForSelector(".send:not([disabled])");
    expect((await storedSession(a, key)).messages.map((m) => m.role)).toEqual(["user", "error"]);
    await context.close();
  });

  it("go on with an answer when another tab's re-attach of it was refused, but not for good", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    // Tab A's stream is cut after run_started.
    const a = await tabWhoseTriesStopped(key, context, 1, "[chunks:8] kept in tab A");
    // Tab B's re-attach of the same answer meets a gateway fault (500): it gives up, the run goes on.
    const b = await openDemo(wb, key, { context, beforeLoad: async (p) => void (await p.route(EVENT_REQUESTS, (route: Route) => refuseWith(route, 500))) });
    await b.locator(".msg.error").waitFor();
    await a.waitForTimeout(300);
    // Tab A, back online, finishes the answer.
    await a.unroute(EVENT_REQUESTS);
    await a.evaluate("window.dispatchEvent(new Event('online'))");
    const final = "Echo: kept in tab A";
    await eventually(async () => (await a.locator(".msg.assistant").allTextContents()).includes(final), { timeoutMs: 10_000, intervalMs: 30 });
    expect((await storedSession(a, key)).messages.map((m) => m.role)).toEqual(["user", "error", "assistant"]);
    await context.close();
  });

  it("show an answer once when another tab finished it after this tab's re-attaches stopped", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    // Tab A's stream is cut after run_started and two chunks.
    const a = await tabWhoseTriesStopped(key, context, 3, "[chunks:8] finished in another tab");
    // Tab B, opened now, picks the pending answer up and finishes it.
    const b = await openDemo(wb, key, { context });
    const final = "Echo: finished in another tab";
    await watchAnswer(b, final);
    const answersOfA = () => a.locator(".msg.assistant").allTextContents();
    await eventually(async () => (await answersOfA()).includes(final), { timeoutMs: 5_000, intervalMs: 30 });
    await a.waitForTimeout(200);
    expect(await answersOfA()).toEqual(["Hi! How can I help you today?", final]);
    await context.close();
  });

  it("do not redraw the transcript when only the visitor token another tab renewed changed", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    const a = await openDemo(wb, key, { context });
    await openPanel(a);
    await ask(a, "[chunks:2] before the renewal", "Echo: before the renewal");
    const b = await openDemo(wb, key, { context });
    await panelShown(b);
    const log = `document.querySelector("agentrun-chat").shadowRoot.querySelector(".msg.user")`;
    await b.evaluate(`${log}.dataset.seen = "yes"`);
    // What tab A's next request does: it stores the token the gateway renewed.
    await a.evaluate(`(() => {
      const k = ${JSON.stringify(`agentrun-widget:${key}`)};
      const s = JSON.parse(localStorage.getItem(k));
      localStorage.setItem(k, JSON.stringify({ ...s, token: s.token + "x" }));
    })()`);
    await b.waitForTimeout(300);
    expect(await b.evaluate(`${log}.dataset.seen`)).toBe("yes");
    // A change of the transcript is drawn.
    await ask(a, "[chunks:2] after the renewal", "Echo: after the renewal");
    await until(b, `document.querySelector("agentrun-chat").shadowRoot.querySelectorAll(".msg.user").length === 2`);
    expect(await b.evaluate(`${log}.dataset.seen`)).toBeUndefined();
    await context.close();
  });
});

describe("pages that embed the widget their own way", () => {
  const PAGE = "/embedding-page";
  const pageWith = (key: string, head: string) =>
    `<!doctype html><html><head><title>shop</title>${head}</head><body><main>A shop</main>` +
    `<script src="widget.js" data-widget-key="${key}" async></script><script src="widget.js" data-widget-key="${key}" defer></script></body></html>`;

  it("loads once when embedded twice, keeps the valid part of a stored session, and keeps the page's inherited CSS out", async () => {
    const key = await widgetKeyFor(wb);
    const stored = { open: true, token: 42, messages: [null, { role: "user", text: "earlier question" }, { role: "system", text: "x" }, { role: "assistant", text: "earlier answer" }, { role: "user", text: {} }] };
    const page = await openDemo(wb, key, {
      path: PAGE,
      beforeLoad: async (p) => {
        await p.route(`**${PAGE}`, (route: Route) =>
          route.fulfill({ contentType: "text/html", body: pageWith(key, "<style>*{letter-spacing:6px;text-transform:uppercase;text-align:right;cursor:crosshair}</style>") }),
        );
        await p.addInitScript(`localStorage.setItem(${JSON.stringify(`agentrun-widget:${key}`)}, ${JSON.stringify(JSON.stringify(stored))})`);
      },
    });
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    await page.waitForLoadState("load");
    expect(await page.locator("agentrun-chat").count()).toBe(1);
    expect(await page.locator(".msg").allTextContents()).toEqual(["Hi! How can I help you today?", "earlier question", "earlier answer"]);
    const style = await page.evaluate(`(() => {
      const s = getComputedStyle(document.querySelector("agentrun-chat").shadowRoot.querySelector(".msg.user .text"));
      return { letterSpacing: s.letterSpacing, textTransform: s.textTransform, cursor: s.cursor };
    })()`);
    expect(style).toEqual({ letterSpacing: "normal", textTransform: "none", cursor: "auto" });
    await ask(page, "[chunks:2] still works", "Echo: still works");
    await page.close();
  });
});

describe("a stored session whose visitor token has expired", () => {
  const tokenWith = (expSeconds: number) => `v1.${Buffer.from(JSON.stringify({ visitor_id: "vis_old", widget_key_id: "wk_old", exp: expSeconds })).toString("base64url")}.c2ln`;
  const storedAs = (token: string) => ({ open: true, token, taskId: "task_old", messages: [{ role: "user", text: "earlier question" }, { role: "assistant", text: "earlier answer" }] });

  it.each([
    ["expired a minute ago: the transcript is dropped, from storage too", -60, ["Hi! How can I help you today?"]],
    ["valid for another hour: the transcript is shown", 3600, ["Hi! How can I help you today?", "earlier question", "earlier answer"]],
  ])("%s", async (_name, inSeconds, shown) => {
    const key = await widgetKeyFor(wb);
    const stored = storedAs(tokenWith(Math.floor(Date.now() / 1000) + inSeconds));
    const page = await openDemo(wb, key, {
      beforeLoad: async (p) => {
        // Expired: also a message this tab was still sending in that conversation, which goes with it.
        const sending = inSeconds < 0 ? `sessionStorage.setItem(${JSON.stringify(`agentrun-widget:${key}:sending`)}, ${JSON.stringify(JSON.stringify({ key: "k-old", at: Date.now(), body: { query: "unsent question", task_id: "task_old" } }))});` : "";
        await p.addInitScript(`if (!sessionStorage.getItem("seeded")) { sessionStorage.setItem("seeded", "1"); ${sending} localStorage.setItem(${JSON.stringify(`agentrun-widget:${key}`)}, ${JSON.stringify(JSON.stringify(stored))}); }`);
      },
    });
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    expect(await page.locator(".msg").allTextContents()).toEqual(shown);
    const kept = (await page.evaluate(`JSON.parse(localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}`)}))`)) as { token?: string; taskId?: string; messages?: unknown[] };
    expect((kept.messages ?? []).length).toBe(shown.length - 1);
    if (inSeconds < 0) {
      expect([kept.token ?? null, kept.taskId ?? null]).toEqual([null, null]);
      expect(await page.evaluate(`sessionStorage.getItem(${JSON.stringify(`agentrun-widget:${key}:sending`)})`)).toBeNull();
    }
    // The next message is answered either way (a new conversation where the stored one is over or unknown).
    await ask(page, "[chunks:2] fresh start", "Echo: fresh start");
    await page.close();
  });
});

describe("the keyboard", () => {
  it("keeps the focus in the dialog when the Send button sends, and closes it with Escape on the bubble", async () => {
    const page = await openDemo(wb, await widgetKeyFor(wb));
    await openPanel(page);
    await inputOf(page).fill("[chunks:2] sent with the button");
    await page.keyboard.press("Tab");
    expect(await isFocused(page.locator(".send"))).toBe(true);
    await page.keyboard.press("Space");
    expect(await isFocused(inputOf(page))).toBe(true);
    await watchAnswer(page, "Echo: sent with the button");
    await bubbleOf(page).focus();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "hidden" });
    expect(await isFocused(bubbleOf(page))).toBe(true);
    await page.close();
  });
});
