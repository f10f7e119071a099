/**
 * Whether `rawHeaders` (name, value, name, value, …, as Node keeps them) holds the header
 * `lowerName` more than once. Node keeps only the first of some repeated headers
 * (`Content-Type`, `Authorization`, …) in `req.headers`, so a repeat is visible only here.
 */
export function headerSentTwice(rawHeaders: string[], lowerName: string): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === lowerName.length && rawHeaders[i]!.toLowerCase() === lowerName) {
      if (seen) return true;
      seen = true;
    }
  }
  return false;
}
