import type { IncomingMessage } from "node:http";
import type { Readable, Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { RequestHandler } from "express";
import getRawBody from "raw-body";
import { AppError } from "@agentrun/errors";

/** The content codings a body may arrive in, with their decoders. */
const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  "x-gzip": createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Whether the request carries a body (of any length, even 0), as HTTP/1.1 frames it. */
export function hasBody(req: Pick<IncomingMessage, "headers">): boolean {
  return req.headers["transfer-encoding"] !== undefined || !Number.isNaN(Number(req.headers["content-length"]));
}

/**
 * Reads the request's body, decoded from its Content-Encoding (gzip, deflate, br), into
 * `req.body` as bytes, and hands them to `inspect` before the next handler; a request without a
 * body is passed on untouched. At most `limitBytes` (decoded) are read: a body found longer while
 * it arrives (chunked, or compressed) is answered 413 at once, and the rest of it is read and
 * dropped after the answer (up to the server's request timeout) rather than before it, so that a
 * client sending an endless body gets its answer. The other failures (a body that is not what its
 * coding says, a client that went away) are 400 `invalid_request`, an unknown coding 415.
 */
export function readBody(limitBytes: number, inspect: (req: IncomingMessage, body: Buffer) => void): RequestHandler {
  return (req, _res, next) => {
    if (!hasBody(req)) return next();
    const coding = String(req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
    let decoder: Transform | null = null;
    if (coding !== "identity") {
      const decoderFor = DECODERS[coding];
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
        // What was not read is dropped once the answer is under way (Node reads the request to
        // its end, or to its timeout, before the connection takes another one).
        req.resume();
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
  };
}

function bodyError(err: Error & { type?: string }, coding: string, limitBytes: number): AppError {
  if (err.type === "entity.too.large") return new AppError("payload_too_large", { message: `The request body is too large: at most ${limitBytes} bytes.` });
  if (err.type === undefined && coding !== "identity") {
    return new AppError("invalid_request", { message: `The request body is not valid ${coding} data, as its Content-Encoding says.` });
  }
  return new AppError("invalid_request", { message: "The request body could not be read." });
}
