import { createHash, timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { bearerRefusal } from "@agentrun/errors";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

const digest = (value: string): Buffer => createHash("sha256").update(value).digest();

/**
 * Requires `Authorization: Bearer <INTERNAL_TOKEN>` (401 otherwise). Both sides are hashed to
 * equal-length digests first, so the comparison takes the same time whatever the token's length.
 */
export function internalAuth(token: string): RequestHandler {
  const expected = digest(token);
  return (req, _res, next) => {
    const presented = BEARER.exec(req.get("authorization") ?? "")?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      const problem = presented ? "invalid_token" : req.get("authorization") === undefined ? null : "invalid_request";
      throw bearerRefusal("agentrun-memory", problem, { message: "A valid internal token is required." });
    }
    next();
  };
}
