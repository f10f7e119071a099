import { request as httpRequest } from "node:http";
import OpenAI from "openai";
import { createLogger } from "@agentrun/logger";
import { startScriptedModel } from "../src/server";

describe("client disconnects", () => {
  /** A scripted model whose debug lines are recorded with the time they were logged. */
  async function startRecording() {
    const logger = createLogger({ service: "scripted-model", level: "debug", pretty: false });
    const lines: { msg: string; at: number }[] = [];
    logger.debug = ((_obj: unknown, msg?: string) => {
      lines.push({ msg: msg ?? "", at: Date.now() });
    }) as typeof logger.debug;
    return { server: await startScriptedModel({ logger }), lines };
  }

  /** Posts a streaming request and disconnects as soon as the first bytes arrive. */
  function readFirstChunkAndLeave(url: string, content: string): Promise<{ text: string; leftAt: number }> {
    const body = JSON.stringify({ model: "scripted", stream: true, messages: [{ role: "user", content }] });
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        res.once("data", (d: Buffer) => {
          req.destroy();
          resolve({ text: d.toString(), leftAt: Date.now() });
        });
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  async function waitFor<T>(find: () => T | undefined, ms: number): Promise<T | undefined> {
    const deadline = Date.now() + ms;
    for (let found = find(); Date.now() < deadline; found = find()) {
      if (found !== undefined) return found;
      await new Promise((r) => setTimeout(r, 5));
    }
    return find();
  }

  it("stops a sleeping stream as soon as the client goes away, not when its timer would fire", async () => {
    const { server, lines } = await startRecording();
    try {
      const { text, leftAt } = await readFirstChunkAndLeave(server.url, "[sleep:4000][chunks:50] long answer here");
      expect(text).toMatch(/^data: \{/);
      // The next chunk's 4 s wait must be cancelled by the disconnect: noticed long before that
      // wait would end, had only the next write found the client gone.
      const gone = await waitFor(() => lines.find((l) => l.msg.startsWith("client went away")), 3000);
      expect(gone).toBeDefined();
      expect((gone?.at ?? Infinity) - leftAt).toBeLessThan(3000);
    } finally {
      await server.close();
    }
  });

  it("ends a [hang] when the client aborts", async () => {
    const { server, lines } = await startRecording();
    try {
      const hanging = new OpenAI({ baseURL: server.url, apiKey: "test", maxRetries: 0, logLevel: "off" });
      const abort = new AbortController();
      const pending = hanging.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "[hang]" }] }, { signal: abort.signal });
      await new Promise((r) => setTimeout(r, 100));
      expect(lines.some((l) => l.msg.startsWith("client went away"))).toBe(false);
      abort.abort();
      await expect(pending).rejects.toThrow();
      expect(await waitFor(() => lines.find((l) => l.msg.startsWith("client went away")), 1000)).toBeDefined();
    } finally {
      await server.close();
    }
  });
});
