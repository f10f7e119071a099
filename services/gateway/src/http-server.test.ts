import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { gatewayConfigSchema } from "./config";
import { createHttpServer } from "./http-server";

/**
 * The gateway's server hands Express requests and responses that already have the app's
 * prototypes, so that Express's Object.setPrototypeOf changes nothing (see appMessageClasses).
 */
describe("createHttpServer", () => {
  const app = express();
  app.use(express.json());
  app.post("/echo", (req, res) => {
    res.set("X-Seen", String(req.get("x-probe"))).status(201).json({ body: req.body as unknown, path: req.path, query: req.query, ip: typeof req.ip });
  });
  const config = gatewayConfigSchema.parse({ DATABASE_URL: "postgresql://unused@127.0.0.1:1/unused", REDIS_URL: "redis://127.0.0.1:1" });
  const server = createHttpServer(app, config);
  const seen: { request: boolean; response: boolean; nodeClasses: boolean }[] = [];
  // Runs before Express's handler: what Node made, before Express touched it.
  server.prependListener("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push({
      request: Object.getPrototypeOf(req) === app.request,
      response: Object.getPrototypeOf(res) === app.response,
      nodeClasses: req instanceof http.IncomingMessage && res instanceof http.ServerResponse,
    });
  });
  let base = "";

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("makes requests and responses with the app's prototypes, which still work as Node's and Express's", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/echo?n=${i}`, { method: "POST", headers: { "content-type": "application/json", "x-probe": `p${i}` }, body: JSON.stringify({ i }) });
      expect(res.status).toBe(201);
      expect(res.headers.get("x-seen")).toBe(`p${i}`);
      expect(await res.json()).toEqual({ body: { i }, path: "/echo", query: { n: String(i) }, ip: "string" });
    }
    expect(seen).toEqual(Array.from({ length: 3 }, () => ({ request: true, response: true, nodeClasses: true })));
  });

  it("keeps idle connections open for KEEP_ALIVE_TIMEOUT_MS (65 s unless set)", () => {
    expect(server.keepAliveTimeout).toBe(65_000);
    const longer = createHttpServer(app, gatewayConfigSchema.parse({ KEEP_ALIVE_TIMEOUT_MS: "620000" }));
    expect(longer.keepAliveTimeout).toBe(620_000);
    expect(longer.headersTimeout).toBe(config.REQUEST_TIMEOUT_MS);
    expect(() => gatewayConfigSchema.parse({ KEEP_ALIVE_TIMEOUT_MS: "500" })).toThrow();
  });
});
