import type { RequestHandler } from "express";
import { AppError } from "@agentrun/errors";

/** The expectation Node handles itself (`checkContinue`), as Node recognises it. */
const CONTINUE_EXPECTATION = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * Refuses what Node's HTTP server would refuse with a bare status line and an empty body, and
 * leaves to the app here (see createHttpServer), so that the answer has the contract's shape and
 * an X-Request-Id: an HTTP/1.1 request without Host (400), and one whose Expect is anything but
 * 100-continue (417, as RFC 9110 prescribes for an expectation the server cannot meet). The
 * connection closes after either: the client may still be holding back a body.
 * Mount it first, after the request id.
 */
export function refuseMalformedHead(): RequestHandler {
  return (req, _res, next) => {
    if (req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      const close = { Connection: "close" };
      if (req.headers.host === undefined) {
        throw new AppError("invalid_request", { message: "An HTTP/1.1 request must send a Host header.", headers: close });
      }
      const expect = req.headers.expect;
      if (expect !== undefined && !CONTINUE_EXPECTATION.test(expect)) {
        throw new AppError("invalid_request", { status: 417, message: "The only expectation served is Expect: 100-continue.", headers: close });
      }
    }
    next();
  };
}
