import type { Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";

/** The content codings a body may come in, each with its decoder. */
const DECODERS = new Map<string, () => Transform>([
  ["gzip", createGunzip],
  ["x-gzip", createGunzip],
  ["deflate", createInflate],
  ["br", createBrotliDecompress],
]);

/**
 * The decoder of a `Content-Encoding` (case and surrounding spaces aside), or undefined for one
 * not read here. Request bodies (the services' JSON bodies) and model answers (the worker's
 * model calls) are decoded alike.
 */
export function contentDecoder(coding: string): (() => Transform) | undefined {
  return DECODERS.get(coding.trim().toLowerCase());
}
