/**
 * JSON numbers that JavaScript (and so this service) would not keep as they were written: an
 * integer beyond ±(2^53 − 1), which would be stored rounded (12345678901234567890 becomes
 * 12345678901234567000), and a number beyond the range of a double, which would become
 * Infinity and then `null`, or 0. This is I-JSON's rule (RFC 7493, 2.2): such values travel as
 * strings. A number written with a fraction or an exponent within range (1.5e300, 0.1) is
 * the double it names, as JSON parsers everywhere read it, and is accepted.
 */

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A JSON number token (RFC 8259, 6); anything else number-like is left to the parser, which refuses it. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** The first number in the JSON text `buf` that would not be kept as written, or null. */
export function inexactNumber(buf: Uint8Array): string | null {
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]!;
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next byte is escaped
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
      continue;
    }
    if (c !== 0x2d && (c < 0x30 || c > 0x39)) continue;
    // A number token: -?digits(.digits)?([eE][+-]?digits)?
    const start = i;
    let fractionOrExponent = false;
    while (i + 1 < buf.length) {
      const n = buf[i + 1]!;
      if ((n >= 0x30 && n <= 0x39) || n === 0x2d || n === 0x2b) i++;
      else if (n === 0x2e || n === 0x65 || n === 0x45) {
        fractionOrExponent = true;
        i++;
      } else break;
    }
    const length = i - start + 1;
    // Up to 15 digits without an exponent is always exact; anything shorter needs no look.
    if (length < 16 && !fractionOrExponent) continue;
    const token = Buffer.from(buf.subarray(start, i + 1)).toString("latin1");
    if (JSON_NUMBER.test(token) && !judge(token)) return token;
  }
  return null;
}

/** Whether the number `token` (a valid JSON number) is kept as written. */
function judge(token: string): boolean {
  if (!/[.eE]/.test(token)) {
    const n = BigInt(token);
    return n <= MAX_SAFE && n >= -MAX_SAFE;
  }
  const value = Number(token);
  if (!Number.isFinite(value)) return false;
  // Underflow: a mantissa with a digit other than 0 that became 0.
  if (value === 0) return !/[1-9]/.test(token.split(/[eE]/)[0]!);
  return true;
}
