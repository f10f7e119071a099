/**
 * What Prisma's pg driver adapter reports as the cause of an error: PostgreSQL's error (its
 * SQLSTATE in `code` or `originalCode`, its text in `originalMessage`) or a connection failure
 * (`kind`, `reason`). Every field may be missing.
 */
export interface DriverCause {
  code?: unknown;
  originalCode?: unknown;
  kind?: unknown;
  reason?: unknown;
  message?: unknown;
  originalMessage?: unknown;
}

/** The driver adapter's cause of an error raised through Prisma, if any. */
export function driverCauseOf(err: unknown): DriverCause | undefined {
  return (err as { meta?: { driverAdapterError?: { cause?: DriverCause } } } | null)?.meta?.driverAdapterError?.cause;
}

/**
 * The SQLSTATE of a PostgreSQL error raised through Prisma's driver adapter (e.g. `AR404` from a
 * `RAISE`, `3D000` no such database, `42P01` no such table, `22003` value out of range), if any.
 */
export function sqlStateOf(err: unknown): string | undefined {
  const cause = driverCauseOf(err);
  const code = cause?.code ?? cause?.originalCode;
  return typeof code === "string" ? code : undefined;
}
