import { chromium, type Browser, type BrowserContext, type Page, type Route } from "playwright-core";
import type { PrismaClient } from "@agentrun/db";
import { createTenant, createWidgetKey, eventually, startStack, testEnv, testPrisma, within, type Stack } from "@agentrun/testing";

// What the widget's browser tests share: a real stack, Debian's Chromium driven by playwright-core,
// widget keys that allow the gateway's own origin, and the widget's elements by their roles.
const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export interface WidgetBrowser {
  stack: Stack;
  prisma: PrismaClient;
  browser: Browser;
  /** Uncaught errors of every page opened by {@link openDemo}. */
  pageErrors: string[];
  stop(): Promise<void>;
}

/** `gatewayEnv`: settings of the stack's gateway beyond the demo page and the lifted address limit. */
export async function startWidgetBrowser(gatewayEnv: Record<string, string> = {}): Promise<WidgetBrowser> {
  // Every request comes from 127.0.0.1: lift the per-address limit out of the way.
  // The browser first: one that cannot start (Chromium not installed) leaves no stack running.
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const stack = await startStack({ workers: 1, gatewayEnv: { WIDGET_DEMO: "true", WIDGET_RPM_PER_IP: "10000", ...gatewayEnv } }).catch(async (err: unknown) => {
    await browser.close();
    throw err;
  });
  const prisma = testPrisma(testEnv().databaseUrl);
  return {
    stack,
    prisma,
    browser,
    pageErrors: [],
    async stop() {
      await browser.close();
      await stack.stop();
      await prisma.$disconnect();
    },
  };
}

/**
 * A widget browser for the tests of one file, handed to `use` once started: stopped after them,
 * and no page may have thrown by the end of each test.
 */
export function useWidgetBrowser(use: (wb: WidgetBrowser) => void, gatewayEnv: Record<string, string> = {}): void {
  let wb: WidgetBrowser | undefined;
  beforeAll(async () => {
    wb = await startWidgetBrowser(gatewayEnv);
    use(wb);
  }, 60_000);
  afterAll(async () => {
    await wb?.stop();
  });
  afterEach(() => {
    expect(wb?.pageErrors).toEqual([]);
  });
}

/** The agent `key` belongs to. */
export const agentOfKey = async (wb: WidgetBrowser, key: string) => (await wb.prisma.widgetKey.findUniqueOrThrow({ where: { key } })).agentId;

/** Opens the widget's panel from its bubble and waits until it shows. */
export async function openPanel(p: Page): Promise<void> {
  await bubbleOf(p).click();
  await p.getByRole("dialog", { name: "Assistant chat" }).waitFor({ state: "visible" });
}

/** A tenant's widget key that allows the demo page's origin (the gateway's own, or `origin`). */
export async function widgetKeyFor(wb: WidgetBrowser, credits = 1000, origin = wb.stack.gatewayUrl): Promise<string> {
  const tenant = await createTenant(wb.prisma, { credits, instructions: "You are the shop assistant." });
  return createWidgetKey(wb.prisma, tenant.agentId, [origin]);
}

export interface OpenOptions {
  /** A context of the caller's (tabs of one browser profile share its localStorage); else one of its own. */
  context?: BrowserContext;
  /** Done before the page loads (a fake clock, routes, init scripts). */
  beforeLoad?: (p: Page) => Promise<void>;
  /** The page to load, on the gateway's origin. @defaultValue the demo page with `key` */
  path?: string;
  /** The origin the page is loaded from (a proxy before the gateway). @defaultValue the gateway's */
  origin?: string;
}

/** The demo page with `key` (or `options.path`) in a new page. */
export async function openDemo(wb: WidgetBrowser, key: string, options: OpenOptions = {}): Promise<Page> {
  const p = options.context ? await options.context.newPage() : await wb.browser.newPage({ viewport: { width: 1100, height: 760 } });
  p.on("pageerror", (err) => wb.pageErrors.push(err.message));
  await options.beforeLoad?.(p);
  await p.goto(`${options.origin ?? wb.stack.gatewayUrl}${options.path ?? `/widget-demo?key=${key}`}`);
  return p;
}

export const bubbleOf = (p: Page) => p.getByRole("button", { name: "Chat with Assistant" });
export const inputOf = (p: Page) => p.getByRole("textbox", { name: "Your message" });
export const lastAnswerOf = (p: Page) => p.locator(".msg.assistant").last();
export const isFocused = (l: ReturnType<Page["locator"]>) => l.evaluate((el) => (el.getRootNode() as unknown as { activeElement: unknown }).activeElement === el);

/** Waits until `expression` is true in `p` (evaluated as the test's script, not the page's: its CSP allows no eval). */
export async function until(p: Page, expression: string, timeoutMs = 15_000): Promise<void> {
  await eventually(async () => (await p.evaluate(expression)) === true, { timeoutMs, intervalMs: 30 });
}

/** Polls the last answer of `p` until it reads `final` (or matches it), returning every distinct text seen on the way. */
export async function watchAnswer(p: Page, final: string | RegExp, timeoutMs = 20_000): Promise<string[]> {
  const seen: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = (await lastAnswerOf(p).textContent()) ?? "";
    if (seen.at(-1) !== text) seen.push(text);
    if (typeof final === "string" ? text === final : final.test(text)) return seen;
    if (Date.now() > deadline) throw new Error(`answer never became '${String(final)}'; saw ${JSON.stringify(seen)}`);
    await p.waitForTimeout(30);
  }
}

/** Sends `text` from the widget of `p` (its panel open) and waits for the answer `final`. */
export async function ask(p: Page, text: string, final: string): Promise<void> {
  await p.waitForSelector(".send:not([disabled])");
  await inputOf(p).fill(text);
  await inputOf(p).press("Enter");
  await watchAnswer(p, final);
  await p.waitForSelector(".send:not([disabled])");
}

/** The page's requests to start a run, and to re-attach to one. */
export const RUN_REQUESTS = "**/api/v1/widget/run";
export const EVENT_REQUESTS = "**/api/v1/widget/tasks/*/runs/*/events";

/**
 * Passes the page's message to the gateway, and gives the page the first `n` events of its answer
 * (then `more`, each an event's `id:` and `data:` lines) before the stream ends.
 */
export async function cutRunAfter(p: Page, n: number, more: string[] = []): Promise<void> {
  let delivered!: () => void;
  cutRunsDelivered.set(p, new Promise<void>((resolve) => (delivered = resolve)));
  await p.route(RUN_REQUESTS, async (route: Route) => {
    const response = await route.fetch();
    const events = (await response.text()).split("\n\n").filter((block) => block.includes("data:"));
    await route.fulfill({ response, body: [...events.slice(0, n), ...more].map((e) => `${e}\n\n`).join("") });
    delivered();
  });
}

/**
 * Of a page whose run requests {@link cutRunAfter} cuts: settles once the first of them has been
 * answered. Until then the gateway is still streaming the whole run to the route (slowly on a
 * loaded machine), and a page whose fake clock is fast-forwarded meanwhile gives up on that
 * request (its wait for an answer's headers is a timer) before any event of it arrives.
 */
const cutRunsDelivered = new WeakMap<Page, Promise<void>>();

/** Answers a request with `status` and the gateway's error body. */
export const refuseWith = (route: Route, status: number) => route.fulfill({ status, contentType: "application/json", body: JSON.stringify({ error: { code: "unavailable", message: "Try again later." } }) });

/**
 * Fast-forwards the fake clock of `p` (installed before it loaded) until its re-attaches have
 * stopped, and answers the note then under the last answer.
 */
export async function untilTriesStop(p: Page): Promise<string> {
  const delivered = cutRunsDelivered.get(p);
  if (delivered && (await within(delivered, 30_000)) === "timed out") throw new Error("the run's request was not answered within 30 s");
  // The page reads the answer in its own turn, after the route's: the clock stays until then.
  await p.waitForTimeout(200);
  const note = lastAnswerOf(p).locator(".status");
  for (const deadline = Date.now() + 20_000; (await note.isHidden()) || (await p.locator(".send[disabled]").count()) > 0; ) {
    if (Date.now() > deadline) throw new Error(`the tries never stopped; answer: ${await lastAnswerOf(p).textContent()}`);
    await p.clock.fastForward(20_000);
    await p.waitForTimeout(50);
  }
  return (await note.textContent()) ?? "";
}
