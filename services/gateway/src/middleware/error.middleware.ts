import type { ErrorRequestHandler, RequestHandler } from "express";
import { ZodError } from "zod";
import { AppError, echoed, errorBody, fromHttpStatus, isUnavailableError } from "@agentrun/errors";

/**
 * One entry per invalid field of a failed parse, with its line of the error's message. Zod
 * reports the keys an object does not take as one issue at the object's own path; each is a
 * field of its own here, so that `details` names it (`stauts`, not the empty path of the query),
 * and the message quotes it (`Unrecognized key: "stauts"`, after the object's path if any).
 */
function invalidFields(err: ZodError): { path: string; message: string; text: string }[] {
  return err.issues.flatMap((i) => {
    const at = echoed(i.path.join("."));
    if (i.code !== "unrecognized_keys") return [{ path: at, message: i.message, text: `${at || "body"}: ${i.message}` }];
    return i.keys.map((key) => ({
      path: echoed([...i.path, key].join(".")),
      message: "Unrecognized key",
      text: `${at ? `${at}: ` : ""}Unrecognized key: ${JSON.stringify(echoed(key))}`,
    }));
  });
}

/** How many invalid fields a 400 names; the message counts the others. */
const FIELDS_SHOWN_MAX = 20;
// A field path or key is repeated (by `echoed`) up to 100 characters: a key can be as long as the body.

/** 400 naming the first {@link FIELDS_SHOWN_MAX} invalid fields, in `details` and the message, and counting the rest. */
function invalidRequest(err: ZodError): AppError {
  const all = invalidFields(err);
  const fields = all.slice(0, FIELDS_SHOWN_MAX);
  const more = all.length - fields.length;
  const message = fields.map((f) => f.text).join("; ") + (more > 0 ? `; and ${more} more invalid field${more === 1 ? "" : "s"}` : "");
  return new AppError("invalid_request", { message, details: fields.map(({ path, message }) => ({ path, message })) });
}

/** Maps every error to the contract's `{error:{code,message}}`; 5xx are logged with the stack, never sent. */
export function errorHandler(): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let appErr: AppError;
    if (err instanceof AppError) appErr = err;
    else if (err instanceof ZodError) appErr = invalidRequest(err);
    else appErr = fromHttpStatus(err) ?? (isUnavailableError(err) ? new AppError("unavailable", { cause: err }) : new AppError("internal_error", { cause: err }));

    const log = req.log ?? console;
    if (appErr.status >= 500) log.error({ err, code: appErr.code }, "request failed");
    else log.info({ code: appErr.code, status: appErr.status }, appErr.message);

    if (res.headersSent) {
      res.end();
      return;
    }
    for (const [k, v] of Object.entries(appErr.headers ?? {})) res.setHeader(k, v);
    res.status(appErr.status).json(errorBody(appErr.code, appErr.message, appErr.details));
  };
}

/**
 * Unknown routes, and known paths with a method they do not serve (`PUT /api/run`): 404
 * `not_found` naming both, as Stripe answers an unrecognized request URL; the message says what
 * was asked for, so a wrong method is easy to spot.
 */
export function notFound(): RequestHandler {
  return (req, _res, next) => next(noRoute(req.method, req.originalUrl));
}

/** Longest part of a request's path an error message repeats. */
const PATH_ECHO_MAX = 200;

/** 404 `not_found` for `method` on the path of `url` (without its query), named in the message up to 200 characters. */
export function noRoute(method: string, url: string): AppError {
  const path = url.split("?")[0] ?? "";
  const shown = path.length > PATH_ECHO_MAX ? `${path.slice(0, PATH_ECHO_MAX)}…` : path;
  return new AppError("not_found", { message: `No route for ${method} ${shown}.` });
}
