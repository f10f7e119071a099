import { Resolver } from "node:dns/promises";
import { createSocket as udpSocket } from "node:dgram";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { StoppedBeforeStart, ToolError, type ToolContext } from "./tool";
import { httpGetAction } from "./http.tool";

// A name server that receives queries and never answers: the lookup must count against the
// tool's timeout and stop with the run.
let server: ReturnType<typeof udpSocket>;
let action: ReturnType<typeof httpGetAction>;
const resolver = new Resolver({ timeout: 120_000, tries: 1 });
const lookup = async (hostname: string) => (await resolver.resolve4(hostname)).map((address) => ({ address, family: 4 }));

beforeAll(async () => {
  server = udpSocket("udp4");
  server.on("message", () => {});
  await new Promise<void>((resolve) => server.bind(0, "127.0.0.1", resolve));
  resolver.setServers([`127.0.0.1:${(server.address() as AddressInfo).port}`]);
  action = httpGetAction({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false, lookup });
});
afterAll(async () => {
  // The queries the tool gave up on are still waiting for an answer.
  resolver.cancel();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const ctxWith = (signal: AbortSignal) => ({ orgId: "o", agentId: "a", httpAllowlist: ["slow.example"], signal }) as unknown as ToolContext;

describe("http_get with a name server that does not answer", () => {
  it("gives up at the tool's timeout", async () => {
    const t0 = Date.now();
    const err = await action.run({ url: "https://slow.example/x" }, ctxWith(new AbortController().signal)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolError);
    expect((err as ToolError).code).toBe("timeout");
    // The tool's 300 ms, not the resolver's 120 s (which the test would not outlive).
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it("has at most two lookups in flight, however many calls time out waiting: the rest of the resolver's threads stay the worker's", async () => {
    let started = 0;
    const counted = (hostname: string) => {
      started++;
      return lookup(hostname);
    };
    const limited = httpGetAction({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false, lookup: counted });
    const call = (orgId: string): Promise<ToolError> => limited.run({ url: "https://slow.example/x" }, { ...ctxWith(new AbortController().signal), orgId }).then(
      () => Promise.reject(new Error("fetched")),
      (e: unknown) => e as ToolError,
    );
    const errors = await Promise.all([call("org_a"), call("org_a"), call("org_b"), call("org_c")]);
    // One lookup per organization at a time, two in all: the calls that never got to look up are
    // `busy`, not charged (they did not run); those whose lookup ran out of time are charged.
    expect(errors.map((e) => [e.code, e.charged])).toEqual([
      ["timeout", true],
      ["busy", false],
      ["timeout", true],
      ["busy", false],
    ]);
    // The two lookups that started still wait for the name server: later calls wait for them.
    expect((await call("org_d")).code).toBe("busy");
    expect(started).toBe(2);
  });

  it("stops with the run's stop reason when the run is cancelled", async () => {
    // A tool timeout (and a resolver timeout) far beyond the test's own: only the signal can end
    // the lookup before the test times out.
    const patient = httpGetAction({ timeoutMs: 120_000, maxBytes: 1000, allowPrivate: false, lookup });
    const controller = new AbortController();
    setTimeout(() => controller.abort("cancel"), 50);
    await expect(patient.run({ url: "https://slow.example/x" }, ctxWith(controller.signal))).rejects.toBe("cancel");
  }, 10_000);
});

describe("http_get waiting for a lookup slot", () => {
  let afterThisTest = () => {};
  afterEach(() => afterThisTest());

  it("says a call cancelled while it waited for a slot never started (so it is not charged)", async () => {
    const hanging = new Promise<never>(() => {});
    const action = httpGetAction({ timeoutMs: 120_000, maxBytes: 1000, allowPrivate: false, lookup: () => hanging });
    const holders = new AbortController();
    const hold = (orgId: string) => void action.run({ url: "https://slow.example/x" }, { ...ctxWith(holders.signal), orgId }).catch(() => {});
    // Both slots held by lookups that never answer.
    hold("org_a");
    hold("org_b");
    afterThisTest = () => holders.abort("done");
    const controller = new AbortController();
    setTimeout(() => controller.abort("cancel"), 50);
    const err = await action.run({ url: "https://slow.example/x" }, { ...ctxWith(controller.signal), orgId: "org_c" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoppedBeforeStart);
    expect((err as StoppedBeforeStart).reason).toBe("cancel");
  });
});

describe("http_get to a host with several addresses", () => {
  let web: Server;
  let port: number;
  beforeAll(async () => {
    web = createServer((_req, res) => res.writeHead(200, { "content-type": "text/plain" }).end("here"));
    await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
    port = (web.address() as AddressInfo).port;
  });
  afterAll(async () => {
    web.closeAllConnections();
    await new Promise((resolve) => web.close(resolve));
  });

  it("tries the next checked address when the first refuses the connection", async () => {
    // 127.0.0.2 is on the loopback interface, but nothing listens there on the port.
    const twoAddresses = async () => [
      { address: "127.0.0.2", family: 4 },
      { address: "127.0.0.1", family: 4 },
    ];
    const multi = httpGetAction({ timeoutMs: 5000, maxBytes: 1000, allowPrivate: true, lookup: twoAddresses });
    const ctx = { ...ctxWith(new AbortController().signal), httpAllowlist: ["multi.example"] } as ToolContext;
    await expect(multi.run({ url: `http://multi.example:${port}/` }, ctx)).resolves.toMatchObject({ status: 200, body: "here" });
  });

  it("says why when every address refuses the connection", async () => {
    const twoClosed = async () => [
      { address: "127.0.0.2", family: 4 },
      { address: "127.0.0.3", family: 4 },
    ];
    const multi = httpGetAction({ timeoutMs: 5000, maxBytes: 1000, allowPrivate: true, lookup: twoClosed });
    const ctx = { ...ctxWith(new AbortController().signal), httpAllowlist: ["multi.example"] } as ToolContext;
    const err = (await multi.run({ url: `http://multi.example:${port}/` }, ctx).catch((e: unknown) => e)) as ToolError;
    expect([err.code, err.message]).toEqual(["fetch_failed", expect.stringMatching(/ECONNREFUSED 127\.0\.0\.2.*ECONNREFUSED 127\.0\.0\.3/)]);
  });

  it("refuses the host when any of its addresses is private, without connecting to the others", async () => {
    let requests = 0;
    web.once("request", () => requests++);
    const mixed = async () => [
      { address: "127.0.0.1", family: 4 },
      { address: "10.0.0.1", family: 4 },
    ];
    const action = httpGetAction({ timeoutMs: 5000, maxBytes: 1000, allowPrivate: false, lookup: mixed });
    const ctx = { ...ctxWith(new AbortController().signal), httpAllowlist: ["multi.example"] } as ToolContext;
    await expect(action.run({ url: `http://multi.example:${port}/` }, ctx)).rejects.toMatchObject({ code: "address_not_allowed" });
    expect(requests).toBe(0);
  });
});
