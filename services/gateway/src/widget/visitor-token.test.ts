import { createHmac } from "node:crypto";
import { VisitorTokens } from "./visitor-token";

const SECRET = "unit-test-widget-secret-0123456789abcdef";

describe("VisitorTokens", () => {
  let now = 1_700_000_000_000;
  const tokens = new VisitorTokens(SECRET, 60, () => now);

  it("round-trips the visitor, the widget key and the expiry", () => {
    const token = tokens.sign("vis_1", "wk_1");
    expect(token).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(tokens.verify(token)).toEqual({ visitor_id: "vis_1", widget_key_id: "wk_1", exp: now / 1000 + 60 });
  });

  it("refuses an expired token", () => {
    const token = tokens.sign("vis_1", "wk_1");
    now += 60_000;
    expect(tokens.verify(token)).toBeNull();
    now -= 60_000;
  });

  it("refuses a changed payload, a changed signature, another secret and malformed input", () => {
    const [v, payload, sig] = tokens.sign("vis_1", "wk_1").split(".") as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ visitor_id: "vis_2", widget_key_id: "wk_1", exp: now / 1000 + 60 })).toString("base64url");
    expect(tokens.verify(`${v}.${forged}.${sig}`)).toBeNull();
    expect(tokens.verify(`${v}.${payload}.${sig.slice(0, -2)}AA`)).toBeNull();
    expect(tokens.verify(`${v}.${payload}.`)).toBeNull();
    expect(tokens.verify(`v2.${payload}.${sig}`)).toBeNull();
    expect(new VisitorTokens(`${SECRET}x`, 60, () => now).verify(`${v}.${payload}.${sig}`)).toBeNull();
    for (const bad of ["", "v1", "v1..", "a.b.c.d", "v1.%%%.%%%", "x".repeat(5000)]) expect(tokens.verify(bad)).toBeNull();
  });

  it("accepts a token written one way only: no characters added to its signature, none of its spare bits changed", () => {
    const token = tokens.sign("vis_1", "wk_1");
    const [v, payload, sig] = token.split(".") as [string, string, string];
    // 32 bytes are 43 characters: the last one carries 2 bits that decoding ignores.
    const last = sig.at(-1)!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const sameBits = alphabet[alphabet.indexOf(last) ^ 1]!;
    expect(Buffer.from(`${sig.slice(0, -1)}${sameBits}`, "base64url")).toEqual(Buffer.from(sig, "base64url"));
    for (const variant of [`${sig.slice(0, 10)}!!${sig.slice(10)}`, `${sig}~`, `${sig.slice(0, -1)}${sameBits}`, `${sig}=`]) {
      expect(tokens.verify(`${v}.${payload}.${variant}`)).toBeNull();
    }
    expect(tokens.verify(token)).not.toBeNull();
  });

  it("refuses a signed payload of the wrong shape", () => {
    const other = new VisitorTokens(SECRET, 60, () => now);
    const body = `v1.${Buffer.from(JSON.stringify({ visitor_id: "vis_1", exp: now / 1000 + 60 })).toString("base64url")}`;
    const mac = createHmac("sha256", SECRET).update(body).digest("base64url");
    expect(other.verify(`${body}.${mac}`)).toBeNull();
  });
});
