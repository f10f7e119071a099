import type { Page } from "playwright-core";
import { eventually } from "@agentrun/testing";
import { inputOf, isFocused, lastAnswerOf, openDemo, openPanel, useWidgetBrowser, widgetKeyFor, type WidgetBrowser } from "./widget-browser-helpers";

// The widget's Stop button in a real browser: shown while an answer is being written, it stops the
// run through the widget gateway, and the answer keeps what was streamed with a note under it.
let wb: WidgetBrowser;
useWidgetBrowser((started) => (wb = started));

const STOPPED = "This answer was stopped.";
const stopOf = (p: Page) => p.getByRole("button", { name: "Stop the answer" });
const answerTextOf = (p: Page) => lastAnswerOf(p).locator(".text");

/** Sends `text` and waits until part of its answer is shown: the answer count rises to `answers`. */
async function sendAndWaitForText(p: Page, text: string, answers: number): Promise<void> {
  await inputOf(p).fill(text);
  await inputOf(p).press("Enter");
  await eventually(async () => (await p.locator(".msg.assistant").count()) === answers && ((await answerTextOf(p).textContent()) ?? "").length > 0, { timeoutMs: 15_000, intervalMs: 30 });
}

/** Presses Stop and waits for the stopped answer: its text so far, the note, Stop hidden and Send enabled again. */
async function stopAnswer(p: Page, full: string): Promise<string> {
  await stopOf(p).click();
  await lastAnswerOf(p).locator(".status").getByText(STOPPED).waitFor({ timeout: 15_000 });
  await p.waitForSelector(".send:not([disabled])");
  expect(await stopOf(p).isHidden()).toBe(true);
  const kept = (await answerTextOf(p).textContent()) ?? "";
  expect(kept.length).toBeGreaterThan(0);
  expect(full.startsWith(kept) && kept !== full).toBe(true);
  return kept;
}

/** The run of the task that the widget's session holds, last started. */
async function lastRunOf(p: Page, key: string) {
  const taskId = (await p.evaluate(`JSON.parse(localStorage.getItem(${JSON.stringify(`agentrun-widget:${key}`)})).taskId`)) as string;
  return wb.prisma.run.findFirstOrThrow({ where: { taskId }, orderBy: { createdAt: "desc" } });
}

describe("the widget's Stop button", () => {
  it("shows only while an answer is being written, and stops it: the text so far stays, noted as stopped", async () => {
    const key = await widgetKeyFor(wb);
    const page = await openDemo(wb, key);
    await openPanel(page);
    expect(await stopOf(page).isHidden()).toBe(true);

    await sendAndWaitForText(page, "[sleep:300][chunks:30] an answer the visitor stops", 2);
    expect(await stopOf(page).isVisible()).toBe(true);
    expect(await page.locator(".send[disabled]").count()).toBe(1);
    const kept = await stopAnswer(page, "Echo: an answer the visitor stops");
    // The focus stays in the dialog, in the input, once Stop is gone.
    expect(await isFocused(inputOf(page))).toBe(true);
    const run = await lastRunOf(page, key);
    expect(run.status).toBe("cancelled");
    expect(run.output).toBe(kept);

    // Kept in the transcript as stopped; the next answer is written as usual, Stop gone after it.
    await page.reload();
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    expect(await answerTextOf(page).textContent()).toBe(kept);
    expect(await lastAnswerOf(page).locator(".status").textContent()).toBe(STOPPED);
    await inputOf(page).fill("[chunks:3] and then");
    await inputOf(page).press("Enter");
    await lastAnswerOf(page).getByText("Echo: and then").waitFor({ timeout: 15_000 });
    await page.waitForSelector(".send:not([disabled])");
    expect(await stopOf(page).isHidden()).toBe(true);
    await page.close();
  });

  it("stops an answer resumed after a reload, on its re-attached stream", async () => {
    const key = await widgetKeyFor(wb);
    const page = await openDemo(wb, key);
    await openPanel(page);
    await sendAndWaitForText(page, "[sleep:300][chunks:30] an answer resumed and stopped", 2);
    await page.reload();
    await page.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
    // Resumed: Stop is back once the page follows the answer again.
    await stopOf(page).waitFor({ state: "visible", timeout: 15_000 });
    const kept = await stopAnswer(page, "Echo: an answer resumed and stopped");
    const run = await lastRunOf(page, key);
    expect(run.status).toBe("cancelled");
    expect(run.output).toBe(kept);
    await page.close();
  });
});
