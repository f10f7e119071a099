/**
 * The SQLSTATE of a PostgreSQL error raised through Prisma's driver adapter (e.g. `AR404` from a
 * `RAISE`, `3D000` no such database, `42P01` no such table, `22003` value out of range), if any.
 */
export function sqlStateOf(err: unknown): string | undefined {
  const cause = (err as { meta?: { driverAdapterError?: { cause?: { code?: unknown; originalCode?: unknown } } } } | null)?.meta?.driverAdapterError?.cause;
  const code = cause?.code ?? cause?.originalCode;
  return typeof code === "string" ? code : undefined;
}
