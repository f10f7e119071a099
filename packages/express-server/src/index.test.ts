import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { appMessageClasses, bearerToken } from "./index";

/** An app on a plain Node server made with {@link appMessageClasses}; what its first listener saw. */
async function serve(app: express.Express) {
  const server = http.createServer(appMessageClasses(app), app);
  const protos: [unknown, unknown][] = [];
  server.prependListener("request", (req: http.IncomingMessage, res: http.ServerResponse) => protos.push([Object.getPrototypeOf(req), Object.getPrototypeOf(res)]));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return { url, protos, close };
}

describe("appMessageClasses", () => {
  it("gives each app's requests and responses that app's prototypes before Express sees them", async () => {
    const apps = [express(), express()];
    apps.forEach((app, i) => app.get("/", (_req, res) => void res.send(`app ${i}`)));
    const servers = await Promise.all(apps.map(serve));
    try {
      for (const [i, s] of servers.entries()) {
        expect(await (await fetch(s.url)).text()).toBe(`app ${i}`);
        expect(s.protos).toEqual([[apps[i]!.request, apps[i]!.response]]);
      }
    } finally {
      await Promise.all(servers.map((s) => s.close()));
    }
  });

  it("keeps Node's request and response behaviour: headers, bodies, streamed writes, keep-alive", async () => {
    const app = express();
    app.post("/stream", express.text(), (req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "x-received": String(req.body).length.toString() });
      res.write("one ");
      setTimeout(() => res.end(`two (${req.get("x-probe")}, ${req.httpVersion}, ${res.req === req})`), 10);
    });
    const s = await serve(app);
    try {
      for (const probe of ["a", "b"]) {
        const res = await fetch(`${s.url}/stream`, { method: "POST", headers: { "content-type": "text/plain", "x-probe": probe }, body: "x".repeat(1000) });
        expect(res.headers.get("x-received")).toBe("1000");
        expect(await res.text()).toBe(`one two (${probe}, 1.1, true)`);
      }
      expect(s.protos).toHaveLength(2);
    } finally {
      await s.close();
    }
  });
});

describe("bearerToken", () => {
  it("reads one token after the Bearer scheme, in any case, with spaces around it", () => {
    for (const header of ["Bearer abc", "bearer abc", "BEARER  abc", "Bearer\tabc ", "Bearer abc  "]) expect(bearerToken(header)).toEqual({ token: "abc" });
  });

  it("names no problem without a header and invalid_request for one of another form", () => {
    expect(bearerToken(undefined)).toEqual({ problem: null });
    for (const header of ["", "Bearer", "Bearer ", "Basic abc", "abc", "Bearer a b", "Bearer abc, Bearer abc"]) expect(bearerToken(header)).toEqual({ problem: "invalid_request" });
  });
});
