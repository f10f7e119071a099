import { createHmac, timingSafeEqual } from "node:crypto";
import { visitorTokenPayloadSchema, type VisitorTokenPayload } from "@agentrun/contracts";

const VERSION = "v1";
/** Longer values are refused before any parsing or hashing. */
const MAX_TOKEN_CHARS = 1024;

/**
 * Signs and verifies widget visitor tokens: `v1.<base64url JSON payload>.<base64url HMAC-SHA256>`,
 * the MAC taken over `v1.<payload>` with the gateway's secret. The payload names the visitor, the
 * widget key the session belongs to and an expiry; nothing in it is secret, it only must not be
 * forgeable, so a compact HMAC token is enough (no JWT header or algorithm negotiation to get wrong).
 */
export class VisitorTokens {
  private readonly secret: Buffer;

  /**
   * @param secret - HMAC key (WIDGET_TOKEN_SECRET).
   * @param ttlSeconds - lifetime of a token from its signing.
   * @param now - clock in milliseconds. @defaultValue Date.now
   */
  constructor(
    secret: string,
    private readonly ttlSeconds: number,
    private readonly now: () => number = Date.now,
  ) {
    this.secret = Buffer.from(secret, "utf8");
  }

  /** A token for `visitorId` on widget key `widgetKeyId`, valid for the configured TTL. */
  sign(visitorId: string, widgetKeyId: string): string {
    const payload: VisitorTokenPayload = { visitor_id: visitorId, widget_key_id: widgetKeyId, exp: Math.floor(this.now() / 1000) + this.ttlSeconds };
    const body = `${VERSION}.${Buffer.from(JSON.stringify(payload), "utf8").toString("base64url")}`;
    return `${body}.${this.mac(body).toString("base64url")}`;
  }

  /** The payload of a well-formed, authentic and unexpired token; null otherwise. */
  verify(token: string): VisitorTokenPayload | null {
    if (token.length > MAX_TOKEN_CHARS) return null;
    const parts = token.split(".");
    if (parts.length !== 3 || parts[0] !== VERSION) return null;
    const [, payloadPart, sigPart] = parts as [string, string, string];
    // Compared as text: decoding would skip characters outside base64url and the last
    // character's spare bits, so that one token could be written several ways.
    const expected = Buffer.from(this.mac(`${VERSION}.${payloadPart}`).toString("base64url"));
    const given = Buffer.from(sigPart);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    let payload: VisitorTokenPayload;
    try {
      const parsed = visitorTokenPayloadSchema.safeParse(JSON.parse(Buffer.from(payloadPart, "base64url").toString("utf8")));
      if (!parsed.success) return null;
      payload = parsed.data;
    } catch {
      return null;
    }
    return payload.exp * 1000 > this.now() ? payload : null;
  }

  private mac(data: string): Buffer {
    return createHmac("sha256", this.secret).update(data, "utf8").digest();
  }
}
