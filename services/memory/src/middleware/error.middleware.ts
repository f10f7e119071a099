import type { ErrorRequestHandler, RequestHandler } from "express";
import { ZodError } from "zod";
import { suspectDatabaseOutage } from "@agentrun/db";
import { AppError, errorBody, fromHttpStatus, invalidRequest, isSchemaMissingError, isUnavailableError, schemaMissing } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import type { ServerStop } from "@agentrun/express-server";
import { requestLog } from "../request-context";

/** Any unmatched route: 404 in the contract's error shape. */
export const notFound: RequestHandler = (req) => {
  throw new AppError("not_found", { message: `No route for ${req.method} ${req.path}.` });
};

/** Turns any thrown error into an {@link AppError}; unknown errors become `internal_error`. */
function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  // Named field by field, as the gateway names them.
  if (err instanceof ZodError) return invalidRequest(err);
  const fromStatus = fromHttpStatus(err);
  if (fromStatus) return fromStatus;
  if (isUnavailableError(err)) return new AppError("unavailable", { message: "The database is unavailable; retry shortly.", cause: err });
  if (isSchemaMissingError(err)) return schemaMissing(err);
  return new AppError("internal_error", { cause: err });
}

/**
 * The one error handler: the contract's `{error:{code,message,details?}}` body for everything.
 * 4xx are logged at info, 5xx at error with the stack, which never reaches the response.
 * A 503 `unavailable` has the database checked (see suspectDatabaseOutage). A request the
 * service's stop answered itself while it waited has nothing left to answer.
 */
export function errorHandler(logger: Logger, stop: ServerStop): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (stop.answeredByStop(res)) return;
    if (res.headersSent) return next(err);
    const appErr = toAppError(err);
    if (appErr.code === "unavailable") suspectDatabaseOutage();
    const log = requestLog(res, logger);
    const fields = { code: appErr.code, status: appErr.status, method: req.method, path: req.path };
    if (appErr.status >= 500) log.error({ ...fields, err }, "request failed");
    else log.info(fields, "request rejected");
    if (appErr.headers) res.set(appErr.headers);
    res.status(appErr.status).json(errorBody(appErr.code, appErr.message, appErr.details));
  };
}
