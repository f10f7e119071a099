import type { ErrorRequestHandler, RequestHandler } from "express";
import { ZodError } from "zod";
import { suspectDatabaseOutage } from "@agentrun/db";
import { answeredByStop } from "../shutdown";
import { AppError, errorBody, fromHttpStatus, invalidRequest, isSchemaMissingError, isUnavailableError, schemaMissing } from "@agentrun/errors";

/**
 * Maps every error to the contract's `{error:{code,message}}`; 5xx are logged with the stack, never
 * sent. A 503 `unavailable` has the database checked (see suspectDatabaseOutage).
 */
export function errorHandler(): ErrorRequestHandler {
  return (err, req, res, _next) => {
    // Answered 503 by the gateway's stop while this request waited: what failed since is moot.
    if (answeredByStop(res)) return;
    let appErr: AppError;
    if (err instanceof AppError) appErr = err;
    else if (err instanceof ZodError) appErr = invalidRequest(err);
    else if (isSchemaMissingError(err)) appErr = schemaMissing(err);
    else appErr = fromHttpStatus(err) ?? (isUnavailableError(err) ? new AppError("unavailable", { cause: err }) : new AppError("internal_error", { cause: err }));
    if (appErr.code === "unavailable") suspectDatabaseOutage();

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
