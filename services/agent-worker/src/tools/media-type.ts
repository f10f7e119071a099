import { parse as parseContentType } from "content-type";

/** A response's media type (lower-case `type/subtype`), and the charset it declares, if any. */
export interface MediaType {
  type: string;
  charset?: string;
}

const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/;

/**
 * The media type of a response by its Content-Type, as a browser takes it (the Fetch Standard's
 * "extract a MIME type"): of the comma-separated values, a repeated header's included (a proxy and
 * the application each setting it), the last that is a valid type other than the wildcard one, with its
 * charset or else that of an earlier value of the same type. Null when no value is one (the bytes
 * then tell).
 */
export function mediaTypeOf(header: string | string[] | undefined): MediaType | null {
  const value = Array.isArray(header) ? header.join(",") : (header ?? "");
  let found = null as MediaType | null;
  for (let start = 0; start < value.length; ) {
    const { type, index, parameters } = parseContentType(value, { start, comma: true });
    if (MEDIA_TYPE.test(type) && type !== "*/*") {
      const charset: string | undefined = parameters.charset ?? (found?.type === type ? found.charset : undefined);
      found = charset === undefined ? { type } : { type, charset };
    }
    start = index + 1;
  }
  return found;
}
