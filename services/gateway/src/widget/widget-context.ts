import type { AuthContext } from "../request-context";
import type { WidgetKeyRecord } from "./widget-key-cache";

/** Who is calling a widget route: set by the widget auth middleware. */
export interface WidgetContext {
  key: WidgetKeyRecord;
  /** The request's origin, one of the key's allowed origins. */
  origin: string;
  /** From a valid X-Visitor-Token; null when the request carried none. */
  visitorId: string | null;
}

declare module "express-serve-static-core" {
  interface Request {
    widget?: WidgetContext;
  }
}

/** The caller of a widget route; the widget auth middleware guarantees it is set. */
export function widgetOf(req: { widget?: WidgetContext }): WidgetContext {
  if (!req.widget) throw new Error("widget route mounted without the widget auth middleware");
  return req.widget;
}

/** The widget key as the caller of runs: the agent's organization pays, the key stands for the API key. */
export function widgetAuthContext(w: WidgetContext): AuthContext {
  return { orgId: w.key.orgId, keyId: w.key.id, plan: w.key.plan, rpmLimit: w.key.rpmLimit, agentId: w.key.agentId, runReservation: w.key.runReservation };
}
