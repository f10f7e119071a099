import http from "node:http";
import type { AddressInfo } from "node:net";
import express, { type ErrorRequestHandler } from "express";
import { drainServer, ServerStop } from "./server-stop";

/**
 * An app whose requests wait where the test says: `x-wait: lookup` before `acting()` (as an
 * authentication lookup on a database that does not answer; `lookup-then-header` then sets a
 * header, as a rate limiter does), `x-wait: handler` after it (as a write that outlasts the
 * grace). What reached the handler is listed in `acted`, the errors reported in `errors`.
 */
async function serveWaitingApp(stop: ServerStop) {
  let releaseLookups!: () => void;
  const lookups = new Promise<void>((resolve) => (releaseLookups = resolve));
  const acted: string[] = [];
  const errors: unknown[] = [];
  const app = express();
  app.use(stop.closeConnections());
  app.use(async (req, res, next) => {
    const wait = req.get("x-wait");
    if (wait?.startsWith("lookup")) await lookups;
    // Once answered, setting a header throws: the error handler is called.
    if (wait === "lookup-then-header") res.setHeader("x-looked-up", "yes");
    next();
  });
  app.use(stop.acting());
  app.get("/:name", async (req, res) => {
    acted.push(req.params.name!);
    if (req.get("x-wait") === "handler") await new Promise(() => {});
    res.json({ done: req.params.name });
  });
  const onError: ErrorRequestHandler = (err, _req, res, _next) => {
    if (stop.answeredByStop(res)) return;
    errors.push(err);
    res.status(500).end();
  };
  app.use(onError);
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = (name: string, wait?: "lookup" | "lookup-then-header" | "handler") =>
    fetch(`${url}/${name}`, { headers: wait ? { "x-wait": wait } : {} }).then(
      async (res) => ({ status: res.status, connection: res.headers.get("connection"), body: (await res.json()) as unknown }),
      (err: Error) => ({ status: 0, connection: null, body: `client error: ${err.message}` }),
    );
  return { server, get, acted, errors, releaseLookups };
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe("ServerStop.answerWaiting", () => {
  it("answers 503 the requests that have not begun to act, lets none of them act afterwards, and never answers one that acts", async () => {
    const stop = new ServerStop();
    const app = await serveWaitingApp(stop);
    const before = app.get("before", "lookup-then-header");
    const acting = app.get("acting", "handler");
    await until(() => app.acted.includes("acting"));
    stop.begin();
    // A request that arrives once the stop has begun (the listener is still open) waits too.
    const after = app.get("after", "lookup");
    await new Promise((r) => setTimeout(r, 100));

    let answered = -1;
    await drainServer(app.server, { graceMs: 100, beforeCut: async () => void (answered = await stop.answerWaiting()) });
    expect(answered).toBe(2);
    const shuttingDown = { status: 503, connection: "close", body: { error: { code: "unavailable", message: "Shutting down: retry the request." } } };
    expect(await before).toEqual(shuttingDown);
    expect(await after).toEqual(shuttingDown);
    // The one that was acting is cut without an answer: the stop cannot tell what it did.
    expect(await acting).toMatchObject({ status: 0 });

    // Their lookups end after the answer: they go no further, and their errors are not reported.
    app.releaseLookups();
    await new Promise((r) => setTimeout(r, 50));
    expect(app.acted).toEqual(["acting"]);
    expect(app.errors).toEqual([]);
  });

  it("answers nothing when no request waits, and leaves answers already begun alone", async () => {
    const stop = new ServerStop();
    const app = await serveWaitingApp(stop);
    expect(await app.get("quick")).toEqual({ status: 200, connection: "keep-alive", body: { done: "quick" } });
    stop.begin();
    expect(await stop.answerWaiting()).toBe(0);
    await drainServer(app.server, { graceMs: 100 });
    expect(app.acted).toEqual(["quick"]);
  });
});
