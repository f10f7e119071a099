/**
 * Longest answer a calculation may give, in characters (a matrix or a string, as formatted). It
 * is checked in the calc process, so a short expression that builds millions of characters never
 * sends them to the worker.
 */
export const CALC_MAX_RESULT_CHARS = 10_000;
