import { createHash, timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { bearerRefusal } from "@agentrun/errors";
import { bearerToken } from "@agentrun/express-server";

const REALM = "agentrun-memory";
const REFUSED = { message: "A valid internal token is required." };

const digest = (value: string): Buffer => createHash("sha256").update(value).digest();

/**
 * Requires `Authorization: Bearer <INTERNAL_TOKEN>` (401 otherwise). Both sides are hashed to
 * equal-length digests first, so the comparison takes the same time whatever the token's length.
 */
export function internalAuth(token: string): RequestHandler {
  const expected = digest(token);
  return (req, _res, next) => {
    const bearer = bearerToken(req.get("authorization"));
    if (!("token" in bearer)) throw bearerRefusal(REALM, bearer.problem, REFUSED);
    if (!timingSafeEqual(digest(bearer.token), expected)) throw bearerRefusal(REALM, "invalid_token", REFUSED);
    next();
  };
}
