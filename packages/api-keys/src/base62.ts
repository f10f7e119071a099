import { randomBytes } from "node:crypto";

/** The base62 alphabet: digits, then upper case, then lower case. */
export const BASE62_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// 248 = 4 × 62: bytes at or above it are discarded, so every character is equally likely
// (a plain `byte % 62` would favour the first 8 characters).
const ACCEPT_BELOW = 256 - (256 % BASE62_ALPHABET.length);

/**
 * A string of `length` characters drawn uniformly from {@link BASE62_ALPHABET} using the
 * operating system's CSPRNG, by rejection sampling.
 */
export function randomBase62(length: number): string {
  if (!Number.isInteger(length) || length < 0) throw new RangeError("length must be a non-negative integer");
  let out = "";
  while (out.length < length) {
    // About 3% of bytes are rejected; asking for a quarter more keeps it to one read in practice.
    const bytes = randomBytes(Math.ceil((length - out.length) * 1.25) + 4);
    for (const byte of bytes) {
      if (byte >= ACCEPT_BELOW) continue;
      out += BASE62_ALPHABET[byte % BASE62_ALPHABET.length];
      if (out.length === length) break;
    }
  }
  return out;
}
