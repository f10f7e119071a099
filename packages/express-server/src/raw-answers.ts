import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { answeredBeforeBodyEnd, declaresBodyOver } from "@agentrun/json-body";

/**
 * The answers a service's HTTP server gives outside its Express app, in the contract's error
 * shape `{"error":{"code","message"}}` with an X-Request-Id, where Node would send a bare status
 * line: what Node's parser refuses, and the 100 Continue a client waits for. The gateway and the
 * memory service install the same ones, so both answer these requests alike.
 */

/** What Node found wrong with a request before the app saw it: status, reason phrase, message. */
function answerFor(code: string | undefined): [number, string, string] {
  if (code === "HPE_HEADER_OVERFLOW") return [431, "Request Header Fields Too Large", "The request's headers are too large (16 KiB in all)."];
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return [408, "Request Timeout", "The request did not arrive in time."];
  return [400, "Bad Request", "The request is not valid HTTP/1.1 (for example Content-Length sent twice, or with Transfer-Encoding)."];
}

/** Where {@link answerMalformedRequests} logs its answers: a service's logger. */
export interface RawAnswerLog {
  info(fields: { requestId: string; status: number; code: string | undefined }, msg: string): void;
}

/** Longest an answered connection waits for its answer to leave before it is destroyed anyway. */
const ANSWER_FLUSH_MS = 1000;

/**
 * Answers the requests Node's HTTP parser refuses (malformed framing, oversized headers, a
 * request that never arrives in full) in the contract's error shape, with an X-Request-Id of
 * `newRequestId()`'s making (the service's own kind of id: no request id was read). The
 * connection is closed after the answer, whatever the client does with its side (a client that
 * keeps it half-open holds nothing here). Anything else (a TLS handshake that failed or timed
 * out, a reset, a response already under way) is not HTTP that can be answered: the socket is
 * destroyed at once, as Node does. With `log`, each answer gets one info line with its request
 * id, status and Node's error code: the app's access line never sees these requests, and the id
 * the client got must lead somewhere.
 */
export function answerMalformedRequests(server: Server, newRequestId: () => string, log?: RawAnswerLog): void {
  server.on("clientError", (err: Error & { code?: string }, socket: Duplex & { _httpMessage?: { headersSent?: boolean } }) => {
    const httpError = err.code?.startsWith("HPE_") || err.code === "ERR_HTTP_REQUEST_TIMEOUT";
    // A request answered while its body was still arriving (413) gets no second answer.
    if (!httpError || answeredBeforeBodyEnd(socket) || !socket.writable || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, reason, message] = answerFor(err.code);
    const requestId = newRequestId();
    answerRaw(socket, status, reason, { code: "invalid_request", message }, requestId);
    log?.info({ requestId, status, code: err.code }, "request refused by the HTTP parser");
  });
}

/**
 * Expect: 100-continue: a body whose Content-Length declares more than `bodyLimitBytes` is refused
 * (413, by the app's JSON body reader) without inviting the client to send it; any other request
 * is invited and handed to the app. Node would invite every one of them.
 */
export function continueWithinLimit(server: Server, bodyLimitBytes: number): void {
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    if (!declaresBodyOver(req, bodyLimitBytes)) res.writeContinue();
    server.emit("request", req, res);
  });
}

/**
 * Writes a whole answer in the contract's error shape, with `requestId` as its X-Request-Id,
 * straight to a connection the HTTP server no longer answers on (a refused request, a CONNECT),
 * then closes it (destroyed if the answer has not left within a second).
 */
export function answerRaw(socket: Duplex, status: number, reason: string, error: { code: string; message: string }, requestId: string): void {
  const body = JSON.stringify({ error });
  const cutOff = setTimeout(() => socket.destroy(), ANSWER_FLUSH_MS).unref();
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    () => {
      clearTimeout(cutOff);
      socket.destroy();
    },
  );
}
