// The memory client's tests against tiny real HTTP servers each test scripts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AppError } from "@agentrun/errors";
import { createMemoryClient } from "./memory-client";

export type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

/** A tiny real HTTP server whose behaviour each test scripts. */
export async function startServer(handler: Handler): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => handler(req, body, res));
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** Servers started by {@link serve}, closed after each test of the file that imports this one. */
const servers: Server[] = [];
export async function serve(handler: Handler): Promise<string> {
  const { url, server } = await startServer(handler);
  servers.push(server);
  return url;
}
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

export const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
};

export const scope = { org_id: "org_1", agent_id: "agt_1" };
export const entry = { memory_id: "mem_1", content: "likes tea", category: "preference", user_id: "u1", created_at: "2026-01-01T00:00:00.000Z" };

/** The rejection of `p`, which must be an AppError. */
export async function rejection(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

export type Method = "create" | "list" | "get" | "remove" | "search" | "context";
/** Calls the client's `method` with a request of its shape against the server at `url`. */
export const callMethod = (method: Method, url: string): Promise<unknown> => {
  const client = createMemoryClient({ baseUrl: url, token: "t" });
  const asked = { ...scope, user_id: "u1", query: "tea" };
  const calls: Record<Method, () => Promise<unknown>> = {
    create: () => client.create({ ...scope, user_id: "u1", content: "likes tea" }),
    list: () => client.list(scope),
    get: () => client.get(scope, "mem_1"),
    remove: () => client.remove(scope, "mem_1"),
    search: () => client.search(asked),
    context: () => client.context(asked),
  };
  return calls[method]();
};
