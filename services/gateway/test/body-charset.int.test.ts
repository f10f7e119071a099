import { randomUUID } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { createWidgetKey, rawExchange, rawHead, rawJsonAnswer, stackWithTenant, type Stack, type Tenant } from "@agentrun/testing";

// A JSON body's declared charset: UTF-8 (in its spellings, or US-ASCII, a subset) is read; any
// other is refused before the body is read, since every check of the body reads its bytes as UTF-8.
const ORIGIN = "https://shop.example";

let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;

stackWithTenant((started) => ({ stack, prisma, tenant } = started), { stack: { workers: 1, memory: false, gatewayEnv: { WIDGET_RPM_PER_IP: "10000" } } });

/** `POST path` with `body` as the bytes it is, declared with `contentType`. */
async function post(path: string, contentType: string, body: Buffer, headers: Record<string, string> = tenant.headers) {
  const res = await fetch(`${stack.gatewayUrl}${path}`, { method: "POST", headers: { ...headers, "content-type": contentType }, body });
  return { status: res.status, requestId: res.headers.get("x-request-id"), body: (await res.json()) as any };
}

const utf16 = (text: string) => Buffer.from(text, "utf16le");
/** Text that is unique to one test, so that what it would create can be looked for. */
const marker = () => `charset-${randomUUID()}`;

describe("a body declared in a charset other than UTF-8", () => {
  it.each(["utf-16le", "UTF-16", "utf-16be", "utf-7", "utf-32", "latin1", "iso-8859-1"])(
    "charset=%s: 415 unsupported_media_type in the contract's shape, nothing created",
    async (charset) => {
      const m = marker();
      const bodies: [string, string][] = [
        ["/api/run", `{"query":"${m} nul\\u0000here","stream":false}`],
        ["/api/run", `{"query":"${m} big","stream":false,"context":{"metadata":{"n":123456789012345678901234567890}}}`],
        ["/api/tasks", `{"title":"${m} t\\u0000x"}`],
        ["/api/tasks", `{"title":"${m}","metadata":{"__proto__":{"x":1},"k":"v"}}`],
        ["/api/tasks", `{"title":"${m} lone \\ud800 x"}`],
      ];
      for (const [path, text] of bodies) {
        const res = await post(path, `application/json; charset=${charset}`, utf16(text));
        expect([path, text, res.status, res.body]).toEqual([path, text, 415, { error: { code: "unsupported_media_type", message: expect.stringContaining("UTF-8") } }]);
        expect(res.requestId).toMatch(/^req_/);
      }
      expect(await prisma.task.count({ where: { orgId: tenant.orgId, title: { contains: m } } })).toBe(0);
      expect(await prisma.run.count({ where: { orgId: tenant.orgId, query: { contains: m } } })).toBe(0);
    },
  );

  it("is refused on the widget's POST /api/v1/widget/run too", async () => {
    const key = await createWidgetKey(prisma, tenant.agentId, [ORIGIN]);
    const m = marker();
    const res = await post("/api/v1/widget/run", "application/json; charset=utf-16le", utf16(`{"query":"${m} nul\\u0000here","stream":false}`), { "x-widget-key": key, origin: ORIGIN });
    expect(res).toMatchObject({ status: 415, body: { error: { code: "unsupported_media_type" } } });
    expect(await prisma.run.count({ where: { agentId: tenant.agentId, query: { contains: m } } })).toBe(0);
  });
});

describe("a body declared as UTF-8, in any spelling, or as US-ASCII", () => {
  it.each(["utf-8", "UTF-8", "utf8", "UTF8", '"utf-8"', "us-ascii", "US-ASCII"])("charset=%s is read", async (charset) => {
    const title = `${marker()} ${charset.includes("ascii") ? "plain" : "h\u00e9 \u{1f600}"}`;
    const res = await post("/api/tasks", `application/json; charset=${charset}`, Buffer.from(JSON.stringify({ title })));
    expect([res.status, res.body.title]).toEqual([201, title]);
  });

  it("is still checked: NUL, __proto__ and an inexact number are 400 invalid_request", async () => {
    for (const text of ['{"title":"t\\u0000x"}', '{"title":"t","metadata":{"__proto__":{"x":1}}}', '{"title":"t","metadata":{"n":123456789012345678901234567890}}']) {
      const res = await post("/api/tasks", "application/json; charset=utf8", Buffer.from(text));
      expect([text, res.status, res.body.error?.code]).toEqual([text, 400, "invalid_request"]);
    }
  });
});

describe("a body with two Content-Type headers", () => {
  it.each([
    ["application/json", "application/json; charset=utf-16"],
    ["application/json", "text/plain"],
    ["text/plain", "application/json"],
  ])("%s and %s: 415 whatever their order, nothing created", async (first, second) => {
    const m = marker();
    const body = JSON.stringify({ title: m });
    // fetch would join the two into one header: each goes on its own line here.
    const head = rawHead("POST", "/api/tasks", [...Object.entries(tenant.headers), ["content-type", first], ["content-type", second], ["content-length", String(Buffer.byteLength(body))], ["connection", "close"]]);
    const res = rawJsonAnswer(await rawExchange(stack.gatewayUrl, head + body));
    expect(res).toEqual({ status: 415, body: { error: { code: "unsupported_media_type", message: "Send the Content-Type header once: application/json." } } });
    expect(await prisma.task.count({ where: { orgId: tenant.orgId, title: m } })).toBe(0);
  });
});
