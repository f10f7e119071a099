import type { Route } from "playwright-core";
import { agentOfKey, ask, inputOf, openDemo, openPanel, useWidgetBrowser, watchAnswer, widgetKeyFor, type WidgetBrowser } from "./widget-browser-helpers";

// A visitor's message whose answer is lost before its run's first event, in a real browser: the
// widget sends it again, the same request with its Idempotency-Key, also after a page reload, and
// shows the answer of the one run it started.
let wb: WidgetBrowser;
useWidgetBrowser((started) => (wb = started));

const agentOf = (key: string) => agentOfKey(wb, key);

describe("a message whose answer is lost before the run's first event", () => {
  it("is sent again with its Idempotency-Key and answered by the run it started, once", async () => {
    const key = await widgetKeyFor(wb);
    const keys: (string | undefined)[] = [];
    const page = await openDemo(wb, key, {
      beforeLoad: async (p) => {
        // The message reaches the service each time. The first answer is lost on the network,
        // the second ends before its first event; the third gets through.
        await p.route("**/api/v1/widget/run", async (route: Route) => {
          keys.push(route.request().headers()["idempotency-key"]);
          if (keys.length > 2) return route.continue();
          const response = await route.fetch();
          if (keys.length === 1) return route.abort("internetdisconnected");
          await route.fulfill({ response, body: "" });
        });
      },
    });
    await openPanel(page);
    await inputOf(page).fill("[chunks:3] asked while the network flickered");
    await inputOf(page).press("Enter");
    await watchAnswer(page, "Echo: asked while the network flickered");
    await page.waitForSelector(".send:not([disabled])");
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(keys).size).toBe(1);
    const runs = await wb.prisma.run.findMany({ where: { task: { agentId: await agentOf(key) } } });
    expect(runs.map((r) => r.query)).toEqual(["[chunks:3] asked while the network flickered"]);
    expect(await page.locator(".msg.user").count()).toBe(1);
    expect(await page.locator(".msg.error").count()).toBe(0);
    // The next message is a new one: a key of its own, and a run of its own on the same task.
    await ask(page, "[chunks:2] and then", "Echo: and then");
    expect(keys).toHaveLength(4);
    expect(keys[3]).not.toBe(keys[0]);
    expect(await wb.prisma.run.count({ where: { taskId: runs[0]!.taskId } })).toBe(2);
    await page.close();
  });

  it("is sent again after a page reload before its answer came, and answered by the run it started, once", async () => {
    const key = await widgetKeyFor(wb);
    const keys: (string | undefined)[] = [];
    let accepted = false;
    let release = () => {};
    const page = await openDemo(wb, key, {
      beforeLoad: async (p) => {
        // The message reaches the service, which starts its run; the answer does not come back
        // before the visitor reloads the page. Sent again, it gets through.
        await p.route("**/api/v1/widget/run", async (route: Route) => {
          keys.push(route.request().headers()["idempotency-key"]);
          if (keys.length > 1) return route.continue();
          await (await route.fetch()).text();
          accepted = true;
          await new Promise<void>((r) => (release = r));
          await route.abort("internetdisconnected").catch(() => {});
        });
      },
    });
    await openPanel(page);
    await inputOf(page).fill("[chunks:3] asked just before a reload");
    await inputOf(page).press("Enter");
    for (const deadline = Date.now() + 15_000; !accepted; await page.waitForTimeout(20)) {
      if (Date.now() > deadline) throw new Error("the message never reached the service");
    }
    await page.reload();
    release();
    await watchAnswer(page, "Echo: asked just before a reload");
    await page.waitForSelector(".send:not([disabled])");
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    const runs = await wb.prisma.run.findMany({ where: { task: { agentId: await agentOf(key) } } });
    expect(runs.map((r) => r.query)).toEqual(["[chunks:3] asked just before a reload"]);
    expect(await page.locator(".msg.user").allTextContents()).toEqual(["[chunks:3] asked just before a reload"]);
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", "Echo: asked just before a reload"]);
    expect(await page.locator(".msg.error").count()).toBe(0);
    // Answered, it is not sent a third time by the next reload.
    await page.reload();
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["Hi! How can I help you today?", "Echo: asked just before a reload"]);
    expect(keys).toHaveLength(2);
    await page.close();
  });

  it("is sent again by the tab that sent it only: another tab of the site leaves it alone", async () => {
    const key = await widgetKeyFor(wb);
    const context = await wb.browser.newContext();
    const sent: string[] = [];
    let accepted = false;
    let release = () => {};
    await context.route("**/api/v1/widget/run", async (route: Route) => {
      sent.push(route.request().headers()["idempotency-key"] ?? "");
      if (sent.length > 1) return route.continue();
      await (await route.fetch()).text();
      accepted = true;
      await new Promise<void>((r) => (release = r));
      await route.abort("internetdisconnected").catch(() => {});
    });
    const a = await openDemo(wb, key, { context });
    await openPanel(a);
    await inputOf(a).fill("[chunks:3] sent from the first tab");
    await inputOf(a).press("Enter");
    for (const deadline = Date.now() + 15_000; !accepted; await a.waitForTimeout(20)) {
      if (Date.now() > deadline) throw new Error("the message never reached the service");
    }
    // A second tab opens while the first one's message waits for its answer: it sends nothing.
    const b = await openDemo(wb, key, { context });
    // (Its panel opens by itself: the session shared by the tabs says it is open.)
    await b.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    await b.waitForTimeout(500);
    expect(sent).toHaveLength(1);
    // The first tab, reloaded, sends its message again and shows the answer.
    await a.reload();
    release();
    await watchAnswer(a, "Echo: sent from the first tab");
    expect(sent).toEqual([sent[0], sent[0]]);
    expect(await wb.prisma.run.count({ where: { task: { agentId: await agentOf(key) } } })).toBe(1);
    await context.close();
  });

  it("is sent again after a reload into a conversation deleted meanwhile, and answered in a new one", async () => {
    const key = await widgetKeyFor(wb);
    const statuses: number[] = [];
    let held = false;
    let release = () => {};
    const page = await openDemo(wb, key, {
      beforeLoad: async (p) => {
        // The conversation's second message is lost on its way; sent again after the reload, it
        // names a conversation deleted meanwhile.
        await p.route("**/api/v1/widget/run", async (route: Route) => {
          if (statuses.length === 1 && !held) {
            held = true;
            await new Promise<void>((r) => (release = r));
            return route.abort("internetdisconnected").catch(() => {});
          }
          const response = await route.fetch();
          statuses.push(response.status());
          await route.fulfill({ response });
        });
      },
    });
    await openPanel(page);
    await ask(page, "[chunks:2] the first message", "Echo: the first message");
    const [first] = await wb.prisma.run.findMany({ where: { task: { agentId: await agentOf(key) } } });
    await inputOf(page).fill("[chunks:3] a message into a deleted conversation");
    await inputOf(page).press("Enter");
    for (const deadline = Date.now() + 15_000; !held; await page.waitForTimeout(20)) {
      if (Date.now() > deadline) throw new Error("the message was never sent");
    }
    await wb.prisma.task.delete({ where: { id: first!.taskId } });
    await page.reload();
    release();
    await watchAnswer(page, "Echo: a message into a deleted conversation");
    await page.waitForSelector(".send:not([disabled])");
    // The message sent again was refused (its conversation is gone) and sent in a new one.
    expect(statuses).toEqual([200, 404, 200]);
    const runs = await wb.prisma.run.findMany({ where: { task: { agentId: await agentOf(key) } } });
    expect(runs.map((r) => r.query)).toEqual(["[chunks:3] a message into a deleted conversation"]);
    expect(runs[0]!.taskId).not.toBe(first!.taskId);
    expect(await page.locator(".msg.error").count()).toBe(0);
    await page.close();
  });
});
