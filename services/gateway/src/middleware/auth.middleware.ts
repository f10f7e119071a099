import type { RequestHandler } from "express";
import { API_KEY_PREFIX, hashApiKey, looksLikeApiKey } from "@agentrun/api-keys";
import { AppError, bearerRefusal, echoed, fieldRefused, type BearerProblem } from "@agentrun/errors";
import { bearerToken } from "@agentrun/express-server";
import { headerSentTwice } from "@agentrun/json-body";
import type { AuthCache } from "../auth/auth-cache";
import type { ApiKeyContext, AuthContext } from "../request-context";
import type { AuthFailureGuard } from "../rate-limit/auth-failure-guard";

/** The realm the API's 401 challenges name (`WWW-Authenticate: Bearer realm="agentrun"`). */
export const API_REALM = "agentrun";
const AGENT_ID = /^[A-Za-z0-9_-]{1,100}$/;

/**
 * Authenticates the API key (401) and resolves the agent named by X-Agent-Id (400 missing,
 * 404 unknown, 403 another organization's), in the contract's order. Failed authentications are
 * counted per client address by `failures`, which turns them into 429 beyond its limit. The
 * accepted key is on `req.apiKey` before the agent check, so that a refusal of the agent can
 * still report the organization's rate-limit state. A token without the shape of an API key is
 * refused like an unknown key, without a lookup: guessing costs no database query.
 */
export function authenticate(cache: AuthCache, failures: AuthFailureGuard): RequestHandler {
  return async (req, _res, next) => {
    const bearer = bearerToken(req.get("authorization"));
    const refuse = (problem: BearerProblem, message: string) => failures.reject(req, bearerRefusal(API_REALM, problem, { message }));
    if (!("token" in bearer)) throw await refuse(bearer.problem, "Missing or malformed Authorization header; expected 'Bearer <API key>'.");
    // Node keeps the first of two Authorization headers and drops the other: which key was meant?
    if (headerSentTwice(req.rawHeaders, "authorization")) throw await refuse("invalid_request", "Send the Authorization header once, with one API key.");
    const keyHash = looksLikeApiKey(bearer.token) ? hashApiKey(bearer.token) : null;
    const key = keyHash ? await cache.apiKey(keyHash) : null;
    if (!keyHash || !key || key.revoked) throw await refuse("invalid_token", "The API key is invalid or revoked.");
    cache.markUsed(key.keyId);
    req.credential = { id: keyHash, checker: cache };
    const apiKey: ApiKeyContext = { orgId: key.orgId, keyId: key.keyId, plan: key.plan, rpmLimit: key.rpmLimit };
    req.apiKey = apiKey;

    const agentId = req.get("x-agent-id");
    if (!agentId) throw fieldRefused("X-Agent-Id", "The X-Agent-Id header is required.");
    // Node joins a header sent twice with ", ": two agents, where the API takes one.
    if (agentId.includes(",")) throw fieldRefused("X-Agent-Id", "Send X-Agent-Id once, with one agent id.");
    const agent = AGENT_ID.test(agentId) ? await cache.agent(agentId) : null;
    if (!agent) throw new AppError("agent_not_found", { message: agentNotFoundMessage(agentId) });
    if (agent.orgId !== key.orgId) throw new AppError("forbidden", { message: "This API key has no access to this agent." });

    // Spelled out rather than spread: V8 gives a spread's copy a map that keeps no transitions, so
    // the two properties added after it would make new maps on every request.
    const auth: AuthContext = { orgId: apiKey.orgId, keyId: apiKey.keyId, plan: apiKey.plan, rpmLimit: apiKey.rpmLimit, agentId: agent.id, runReservation: agent.runReservation };
    req.auth = auth;
    next();
  };
}

/**
 * The 404's message, quoting the id sent. An API key sent as X-Agent-Id is not quoted: the
 * message is logged, and a secret key must never reach the logs.
 */
function agentNotFoundMessage(agentId: string): string {
  if (agentId.includes(API_KEY_PREFIX)) return "No agent has the id given in X-Agent-Id; it looks like an API key, which belongs in Authorization.";
  return `No agent has the id '${echoed(agentId)}'.`;
}
