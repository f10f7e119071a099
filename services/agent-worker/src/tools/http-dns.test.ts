import { ToolError, type ToolContext } from "./tool";

// A name server that never answers: the lookup must count against the tool's timeout and stop
// with the run.
jest.mock("node:dns/promises", () => ({ lookup: () => new Promise(() => {}) }));

import { httpGetAction } from "./http.tool";

const ctxWith = (signal: AbortSignal) => ({ orgId: "o", agentId: "a", httpAllowlist: ["slow.example"], signal }) as unknown as ToolContext;
const action = httpGetAction({ timeoutMs: 300, maxBytes: 1000, allowPrivate: false });

describe("http_get with a name server that does not answer", () => {
  it("gives up at the tool's timeout", async () => {
    const t0 = Date.now();
    const err = await action.run({ url: "https://slow.example/x" }, ctxWith(new AbortController().signal)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolError);
    expect((err as ToolError).code).toBe("timeout");
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it("stops with the run's stop reason when the run is cancelled", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort("cancel"), 50);
    const t0 = Date.now();
    await expect(action.run({ url: "https://slow.example/x" }, ctxWith(controller.signal))).rejects.toBe("cancel");
    expect(Date.now() - t0).toBeLessThan(250);
  });
});
