import { z } from "zod";
import { idParam } from "./common";
import { QUERY_MAX_CHARS } from "./runs";

/** Header carrying the publishable widget key (`pk_…`). */
export const WIDGET_KEY_HEADER = "X-Widget-Key";
/** Header carrying the visitor's session token, in requests and in responses. */
export const VISITOR_TOKEN_HEADER = "X-Visitor-Token";

/**
 * Body of `POST /api/v1/widget/run`. Unlike `/api/run` there is no `context`: the gateway sets
 * `context.user_id` to the visitor, so a page cannot act as another user.
 */
export const widgetRunRequestSchema = z
  .object({
    query: z.string().min(1, "must not be empty").max(QUERY_MAX_CHARS),
    task_id: idParam.optional(),
    stream: z.boolean().default(true),
  })
  .strict();

export type WidgetRunRequest = z.infer<typeof widgetRunRequestSchema>;

/** What a visitor token says, signed by the gateway. */
export const visitorTokenPayloadSchema = z
  .object({
    visitor_id: z.string().min(1).max(100),
    widget_key_id: z.string().min(1).max(100),
    /** Expiry, in seconds since the epoch. */
    exp: z.number().int().positive(),
  })
  .strict();

export type VisitorTokenPayload = z.infer<typeof visitorTokenPayloadSchema>;

/** The `user_id` a widget visitor's runs and memories are scoped to. */
export function visitorUserId(visitorId: string): string {
  return `visitor:${visitorId}`;
}
