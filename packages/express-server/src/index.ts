/**
 * What an Express app's HTTP server needs from Node beyond the app itself (used by the gateway and
 * the memory service).
 */
import http from "node:http";
import type { Express } from "express";

/**
 * Request and response classes whose prototypes are the app's own (`app.request`, `app.response`).
 * Express gives every request and response those prototypes with `Object.setPrototypeOf`. Done to
 * an object that already has properties, V8 gives the object a hidden class (map) of its own, with
 * no transitions shared between objects: every property set afterwards, by Express and by each
 * middleware, made new maps and descriptor arrays (about twenty per request), which filled the old
 * generation and left property access megamorphic. Made with the right prototype from the start,
 * Express's call changes nothing and the requests share their maps.
 */
export function appMessageClasses(app: Express): Required<Pick<http.ServerOptions, "IncomingMessage" | "ServerResponse">> {
  function AppRequest(this: http.IncomingMessage, ...args: unknown[]): void {
    Reflect.apply(http.IncomingMessage, this, args);
  }
  AppRequest.prototype = app.request;
  function AppResponse(this: http.ServerResponse, ...args: unknown[]): void {
    Reflect.apply(http.ServerResponse, this, args);
  }
  AppResponse.prototype = app.response;
  return { IncomingMessage: AppRequest as unknown as typeof http.IncomingMessage, ServerResponse: AppResponse as unknown as typeof http.ServerResponse };
}

/**
 * The X-Request-Id a caller may choose, as the services take it: printable ASCII (spaces
 * included), 1..200 characters once trimmed, or undefined (the service then makes its own).
 * Control and non-ASCII characters or longer values are refused, so the id stays a safe response
 * header and log field. The gateway forwards its request's id to the memory service, which
 * takes it by the same rule, so that both logs carry the same id.
 */
export function clientRequestId(header: string | undefined): string | undefined {
  const id = header?.trim();
  return id && /^[\x20-\x7e]{1,200}$/.test(id) ? id : undefined;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The token of an `Authorization: Bearer <token>` header, as both services take it (the scheme in
 * any case, one token, spaces around it allowed), or why there is none in RFC 6750's terms: `null`
 * when no header was sent, `invalid_request` for a header of another form.
 */
export function bearerToken(header: string | undefined): { token: string } | { problem: "invalid_request" | null } {
  if (header === undefined) return { problem: null };
  const token = BEARER.exec(header)?.[1];
  return token ? { token } : { problem: "invalid_request" };
}

export { answerMalformedRequests, answerRaw, continueWithinLimit } from "./raw-answers";
export { drainServer, ServerStop, type DrainOptions } from "./server-stop";
