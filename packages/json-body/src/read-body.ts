import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable, Transform } from "node:stream";
import type { RequestHandler } from "express";
import getRawBody from "raw-body";
import { AppError } from "@agentrun/errors";
import { contentDecoder } from "./content-codings";

/** The content codings a body may arrive in, with their decoders. */

/**
 * How long a connection whose request was answered before its body had all arrived goes on
 * reading (and dropping) the rest of it: long enough for the client to read the answer rather
 * than have it cut by a reset, after which the connection is closed.
 */
export const DRAIN_AFTER_ANSWER_MS = 2000;

/** Connections whose request was answered while its body was still arriving. */
const answeredEarly = new WeakSet<object>();

/**
 * Whether the request under way on `socket` has been answered already, its body still arriving:
 * a request timeout on it is no reason for a second answer (see answerMalformedRequests).
 */
export function answeredBeforeBodyEnd(socket: object): boolean {
  return answeredEarly.has(socket);
}

/** Drops the rest of a body whose request is answered now, and closes the connection if it keeps coming. */
function dropRest(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (req.complete) return;
  const socket = req.socket;
  answeredEarly.add(socket);
  let cutOff: NodeJS.Timeout | undefined;
  req.once("end", () => {
    clearTimeout(cutOff);
    answeredEarly.delete(socket);
  });
  res.once("finish", () => {
    if (!req.complete) cutOff = setTimeout(() => socket.destroy(), DRAIN_AFTER_ANSWER_MS).unref();
  });
}

/** Whether the request carries a body (of any length, even 0), as HTTP/1.1 frames it. */
function hasBody(req: Pick<IncomingMessage, "headers">): boolean {
  return req.headers["transfer-encoding"] !== undefined || !Number.isNaN(Number(req.headers["content-length"]));
}

/**
 * Reads the request's body, decoded from its Content-Encoding (gzip, deflate, br), into
 * `req.body` as bytes, and hands them to `inspect` before the next handler; a request without a
 * body is passed on untouched. At most `limitBytes` (decoded) are read: a body found longer while
 * it arrives (chunked, or compressed) is answered 413 at once, and the rest of it is read and
 * dropped after the answer rather than before it, so that a client sending an endless body gets
 * its answer; the connection closes {@link DRAIN_AFTER_ANSWER_MS} after the answer if the body
 * is still coming. The other failures (a body that is not what its
 * coding says, a client that went away) are 400 `invalid_request`, an unknown coding 415, as is
 * a transfer coding other than `chunked`.
 */
export function readBody(limitBytes: number, inspect: (req: IncomingMessage, body: Buffer) => void): RequestHandler {
  return (req, res, next) => {
    if (!hasBody(req)) return next();
    refuseTransferCodings(req);
    const coding = String(req.headers["content-encoding"] ?? "").trim().toLowerCase() || "identity";
    let decoder: Transform | null = null;
    if (coding !== "identity") {
      const decoderFor = contentDecoder(coding);
      if (!decoderFor) {
        throw new AppError("unsupported_media_type", { message: `The Content-Encoding ${JSON.stringify(coding)} is not supported: send gzip, deflate, br or none.` });
      }
      decoder = req.pipe(decoderFor());
    }
    const stream: Readable = decoder ?? req;
    const length = coding === "identity" ? req.headers["content-length"] : undefined;
    getRawBody(stream, { limit: limitBytes, length }, (err, body) => {
      if (decoder) {
        req.unpipe(decoder);
        decoder.destroy();
      }
      if (err) {
        dropRest(req, res);
        return next(bodyError(err, coding, limitBytes));
      }
      try {
        inspect(req, body);
      } catch (e) {
        return next(e);
      }
      req.body = body;
      next();
    });
    // After the reader's listeners are on the decoder: it takes the error a gone client gives it.
    if (decoder) endWithClient(req, decoder);
  };
}

/**
 * Refuses a body framed in a transfer coding besides `chunked` (`Transfer-Encoding: gzip,
 * chunked`): Node's parser takes the chunks off and leaves the rest to the application, which
 * would otherwise read, say, gzip bytes as the body itself (RFC 9112 §6.1: a coding the server
 * does not understand is refused). Compressed bodies come with a Content-Encoding.
 */
function refuseTransferCodings(req: Pick<IncomingMessage, "headers">): void {
  const header = req.headers["transfer-encoding"];
  if (header === undefined) return;
  const others = header.split(",").map((c) => c.trim().toLowerCase()).filter((c) => c !== "" && c !== "chunked");
  if (others.length === 0) return;
  throw new AppError("unsupported_media_type", {
    message: `The Transfer-Encoding ${JSON.stringify(header)} is not supported: send the body chunked or with a Content-Length, compressed with a Content-Encoding (gzip, deflate, br) if at all.`,
  });
}

/**
 * Fails `decoder` when the client goes away (or went away) before its body has all arrived: a
 * pipe does not end its destination then, and the body's reader would wait on the decoder for ever.
 */
function endWithClient(req: IncomingMessage, decoder: Transform): void {
  const abandoned = () => {
    if (!req.complete) decoder.destroy(Object.assign(new Error("request aborted"), { type: "request.aborted" }));
  };
  // Gone already, while the handlers before this one (authentication, rate limits) awaited.
  if (req.destroyed) abandoned();
  else req.once("close", abandoned);
}

function bodyError(err: Error & { type?: string }, coding: string, limitBytes: number): AppError {
  if (err.type === "entity.too.large") return new AppError("payload_too_large", { message: `The request body is too large: at most ${limitBytes} bytes.` });
  if (err.type === undefined && coding !== "identity") {
    return new AppError("invalid_request", { message: `The request body is not valid ${coding} data, as its Content-Encoding says.` });
  }
  return new AppError("invalid_request", { message: "The request body could not be read." });
}
