import express, { type Express } from "express";

/**
 * Makes `req.fresh` (which decides whether `res.send` answers 304) true only for a response that
 * carries a validator (ETag or Last-Modified). Express asks the `fresh` package, which counts
 * `If-None-Match: *` as a match for any response: a GET of the task list with that header would
 * be answered 304 with no body, although nothing was cached. Only widget.js sets an ETag.
 */
export function answerConditionalGetsOnlyWithValidator(app: Express): void {
  const fresh = Object.getOwnPropertyDescriptor(express.request, "fresh")?.get;
  if (!fresh) throw new Error("express.request has no `fresh` getter to wrap");
  Object.defineProperty(app.request, "fresh", {
    configurable: true,
    enumerable: true,
    get(this: express.Request): boolean {
      const res = this.res;
      if (!res || (res.get("ETag") === undefined && res.get("Last-Modified") === undefined)) return false;
      return fresh.call(this) as boolean;
    },
  });
}
