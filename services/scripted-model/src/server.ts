/**
 * Starting and stopping the scripted model on an HTTP server, in-process (tests of other services)
 * or from `index.ts`.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger, type Logger } from "@agentrun/logger";
import { createApp } from "./app";

export interface StartScriptedModelOptions {
  /** @defaultValue 0 (a free port) */
  port?: number;
  /** @defaultValue "127.0.0.1" */
  host?: string;
  /** @defaultValue a silent logger */
  logger?: Logger;
}

export interface ScriptedModelServer {
  /** Base URL for OpenAI clients, ending in `/v1`, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  /** Stops the server, cutting open connections (including `[hang]` ones) at once. */
  close(): Promise<void>;
}

/**
 * Starts the scripted model in this process, e.g.
 * `const model = await startScriptedModel(); new OpenAI({ baseURL: model.url, apiKey: "test" })`.
 */
export async function startScriptedModel({ port = 0, host = "127.0.0.1", logger }: StartScriptedModelOptions = {}): Promise<ScriptedModelServer> {
  const log = logger ?? createLogger({ service: "scripted-model", level: "silent", pretty: false });
  const server = createServer(createApp({ logger: log }));
  const address = await listen(server, port, host);
  const hostname = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return { url: `http://${hostname}:${address.port}/v1`, close: () => closeServer(server, 0) };
}

/** Listens on `port` (all interfaces unless `host` is given) and resolves with the bound address. */
export function listen(server: Server, port: number, host?: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    const onListening = () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    };
    if (host === undefined) server.listen(port, onListening);
    else server.listen(port, host, onListening);
  });
}

/**
 * Stops accepting connections and resolves once the server is closed. Idle keep-alive connections
 * are closed at once; requests still running (streams, `[hang]`) get `graceMs` before being cut.
 */
export function closeServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeIdleConnections();
    if (graceMs <= 0) server.closeAllConnections();
    else setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
