import type { Logger } from "@agentrun/logger";
import type { Plan } from "@agentrun/db";

/** The accepted API key: set by the auth middleware before it checks the agent. */
export interface ApiKeyContext {
  orgId: string;
  keyId: string;
  plan: Plan;
  rpmLimit: number | null;
}

/** Who is calling: set by the auth middleware once the key and the agent are accepted. */
export interface AuthContext extends ApiKeyContext {
  agentId: string;
  /** Credits a run of this agent reserves when it is accepted: the agent's base price. */
  runReservation: number;
}

declare module "express-serve-static-core" {
  interface Request {
    /** From X-Request-Id, or generated. */
    id: string;
    log: Logger;
    /** Set even when the agent check then refuses the request. */
    apiKey?: ApiKeyContext;
    auth?: AuthContext;
  }
}

/** The caller of an authenticated route; the auth middleware guarantees it is set. */
export function authOf(req: { auth?: AuthContext }): AuthContext {
  if (!req.auth) throw new Error("route mounted without the auth middleware");
  return req.auth;
}
