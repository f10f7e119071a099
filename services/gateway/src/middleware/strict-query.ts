import querystring from "node:querystring";
import type { Request } from "express";
import { z } from "zod";
import { AppError } from "@agentrun/errors";

/**
 * The app's "query parser": Express's simple parser (`node:querystring`), except that a query
 * string with a malformed percent-encoding, or one that decodes to bytes that are not UTF-8, is
 * refused (400) as it is in a path, instead of being read with the escape left as it was or with
 * U+FFFD where the bytes were (`?user_id=a%FF` would otherwise name the user `a\uFFFD`).
 * Every parameter is read (`node:querystring` would read the first 1,000 and silently drop the
 * rest, and with them a filter placed after 999 others): the URL is bounded by Node's 16 KiB
 * limit on the request's head, so there are never many thousands.
 * Express calls it when a handler reads `req.query`, so the refusal comes in the contract's
 * order: after authentication and the rate limit, with the other parameter checks.
 */
export function strictQueryParser(query: string | null | undefined): querystring.ParsedUrlQuery {
  if (!query) return querystring.parse("");
  if (query.includes("%")) {
    try {
      decodeURIComponent(query);
    } catch {
      throw new AppError("invalid_request", { message: "The URL contains a malformed percent-encoding." });
    }
  }
  return querystring.parse(query, undefined, undefined, { maxKeys: 0 });
}

/** What a route takes none of (query parameters, body fields): any one given is refused, named. */
const NO_FIELDS = z.strictObject({});

/**
 * Called first by a route that reads no query parameter: any one given is 400 `invalid_request`
 * naming it, as the routes with parameters refuse those they do not read, so that nothing is
 * silently ignored (`POST /api/run?stream=false` would otherwise stream).
 */
export function readsNoQuery(req: Request): void {
  if (req.url.includes("?")) NO_FIELDS.parse(req.query);
}

/**
 * Called by a route that takes no body: a JSON body with any field is 400 `invalid_request`
 * naming it (a `{"reason": …}` sent to cancel is not silently dropped); `{}` or no body is fine.
 */
export function takesNoBody(req: Request): void {
  if (req.body !== undefined) NO_FIELDS.parse(req.body);
}
